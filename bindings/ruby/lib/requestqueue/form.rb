# frozen_string_literal: true

require "securerandom"
require "uri"

module RequestQueue
  # Encodes Hash and Array bodies and params the way Faraday (and Rack) do: nested hashes as
  # `a[b]=1`, arrays as `a[]=1&a[]=2`, nil as a bare name, everything else with to_s; with a File
  # or IO value anywhere (anything with #read), the body is multipart/form-data with that value as
  # a file part (filename from #original_filename or #path, Content-Type from #content_type, else
  # application/octet-stream). The library takes a body as one buffer: IO values are read whole
  # when the request is built.
  module Form
    module_function

    # [[name, value], ...] with nested names spelt out ("a[b][]"); values are Strings, nil or IOs.
    def flatten(data, prefix = nil, out = [])
      case data
      when Hash
        data.each { |key, value| flatten(value, prefix ? "#{prefix}[#{key}]" : key.to_s, out) }
      when Array
        if prefix.nil?
          data.each do |pair|
            raise TypeError, "a form Array must hold [name, value] pairs, not #{pair.inspect}" unless pair.is_a?(Array) && pair.size == 2

            flatten(pair[1], pair[0].to_s, out)
          end
        else
          data.each { |value| flatten(value, "#{prefix}[]", out) }
        end
      else
        raise TypeError, "a form value must be inside a Hash or Array" if prefix.nil?

        out << [prefix, io?(data) || data.nil? ? data : data.to_s]
      end
      out
    end

    def io?(value)
      value.respond_to?(:read)
    end

    # The query string of `data` (a Hash or an Array of pairs).
    def query(data)
      flatten(data).map do |name, value|
        raise TypeError, "a file (#{name}) cannot go into a query string" if io?(value)

        value.nil? ? escape(name) : "#{escape(name)}=#{escape(value)}"
      end.join("&")
    end

    def escape(text)
      URI.encode_www_form_component(text)
    end

    # [body, content_type] of a form body: urlencoded, or multipart/form-data when a value is an IO.
    def encode(data)
      fields = flatten(data)
      return [query(data), "application/x-www-form-urlencoded"] unless fields.any? { |_, value| io?(value) }

      boundary = "-----------RubyMultipartPost-#{SecureRandom.hex(16)}"
      body = String.new(encoding: Encoding::BINARY)
      fields.each do |name, value|
        body << "--#{boundary}\r\n"
        if io?(value)
          body << %(Content-Disposition: form-data; name="#{quote(name)}"; filename="#{quote(filename(value))}"\r\n)
          type = value.respond_to?(:content_type) && value.content_type ? value.content_type : "application/octet-stream"
          body << "Content-Type: #{type}\r\nContent-Transfer-Encoding: binary\r\n\r\n"
          body << read(value).b
        else
          body << %(Content-Disposition: form-data; name="#{quote(name)}"\r\n\r\n)
          body << value.to_s.b
        end
        body << "\r\n"
      end
      body << "--#{boundary}--\r\n"
      [body, "multipart/form-data; boundary=#{boundary}"]
    end

    def filename(io)
      name = io.original_filename if io.respond_to?(:original_filename)
      name ||= File.basename(io.path) if io.respond_to?(:path) && io.path
      name || "file"
    end

    def quote(text)
      text.to_s.b.gsub('"', "%22").gsub("\r", "%0D").gsub("\n", "%0A")
    end

    def read(io)
      data = io.read
      raise TypeError, "#{io.class}#read returned #{data.class}, not a String" unless data.is_a?(String)

      data
    end
  end
end
