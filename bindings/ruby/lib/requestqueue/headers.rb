# frozen_string_literal: true

module RequestQueue
  # The headers of a Response as a Hash whose lookups ignore case (response.headers["content-type"]
  # finds "Content-Type"). Keys keep the spelling and order of the first header of each name;
  # repeated headers are joined with ", " into one value, as Faraday and Typhoeus do (the separate
  # values: Response#header_pairs). Frozen.
  class Headers < Hash
    def self.from_pairs(pairs)
      new.__send__(:fill, pairs).freeze
    end

    def initialize
      super
      @keys = {}
    end

    # Hash's own store and lookup, under names of their own (#store and #[] are redefined below).
    alias_method :hash_store, :store
    alias_method :hash_value, :[]
    private :hash_store, :hash_value

    # The key stored for `name` (any case), or nil.
    def key_for(name)
      @keys[name.to_s.downcase]
    end

    def store(key, value)
      @keys[key.to_s.downcase] ||= key
      super
    end

    def [](name)
      key = key_for(name)
      key.nil? ? nil : super(key)
    end

    def fetch(name, *default, &block)
      key = key_for(name)
      key.nil? ? super(name, *default, &block) : super(key)
    end

    def key?(name)
      !key_for(name).nil?
    end
    alias include? key?
    alias has_key? key?
    alias member? key?

    def dig(name, *rest)
      value = self[name]
      rest.empty? || value.nil? ? value : value.dig(*rest)
    end

    def values_at(*names)
      names.map { |name| self[name] }
    end

    # A plain Hash with lower-case names (what Response#header_hash returns).
    def downcased
      each_with_object({}) { |(name, value), hash| hash[name.downcase] = value }
    end

    private

    # Adds the pairs (each name's lower case computed once; what #store does, with one lookup).
    def fill(pairs)
      keys = @keys
      pairs.each do |name, value|
        name = name.to_s
        down = name.downcase
        key = keys[down]
        if key
          hash_store(key, "#{hash_value(key)}, #{value}")
        else
          keys[down] = name
          hash_store(name, value)
        end
      end
      self
    end
  end
end
