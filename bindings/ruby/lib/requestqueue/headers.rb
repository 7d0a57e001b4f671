# frozen_string_literal: true

module RequestQueue
  # The headers of a Response as a Hash whose lookups ignore case (response.headers["content-type"]
  # finds "Content-Type"). Keys keep the spelling and order of the first header of each name;
  # repeated headers are joined with ", " into one value, as Faraday and Typhoeus do (the separate
  # values: Response#header_pairs). Frozen.
  class Headers < Hash
    def self.from_pairs(pairs)
      headers = new
      pairs.each do |name, value|
        key = headers.key_for(name) || name
        headers.store(key, headers.include?(key) ? "#{headers.fetch(key)}, #{value}" : value)
      end
      headers.freeze
    end

    def initialize
      super
      @keys = {}
    end

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
  end
end
