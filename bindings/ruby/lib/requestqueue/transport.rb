# frozen_string_literal: true

module RequestQueue
  # Transport settings (content decoding, User-Agent, proxies, TLS, connections, cookies) as
  # options of Request, and a queue's defaults (see rq_option and rq_queue_get_defaults in
  # requestqueue.h).
  module Transport
    # option => [rq_option value, kind]
    OPTIONS = {
      decode_content: [1, :bool], user_agent: [2, :string], proxy: [3, :string], no_proxy: [4, :string],
      client_cert: [5, :path], client_key: [6, :path], key_password: [7, :string],
      pinned_public_key: [8, :string], ca_dir: [9, :path], tls_min_version: [10, :int],
      unsafe_no_tls_verify: [11, :bool], unix_socket: [12, :path], resolve: [13, :string],
      interface: [14, :string], ip_version: [15, :int], tcp_keepalive: [16, :int],
      max_recv_speed: [17, :int], max_send_speed: [18, :int], http_version: [19, :int], cookies: [20, :bool],
      proxy_ca_file: [21, :path]
    }.freeze
    TLS_VERSIONS = { "1.0" => 10, "1.1" => 11, "1.2" => 12, "1.3" => 13 }.freeze
    HTTP_VERSIONS = { "1.1" => 11, "2" => 0, "2-prior-knowledge" => 20 }.freeze
    # The options of Queue.new(defaults: ...) besides the transport ones.
    DEFAULT_OPTIONS = (%i[headers timeout connect_timeout idle_timeout header_timeout low_speed_limit
                          credentials retry max_redirects max_response_size ca_file] + OPTIONS.keys).freeze

    # A cookie of a queue's jar (Queue#cookies), as a line of a Netscape cookie file. expires is
    # a Unix time, 0 for a session cookie.
    Cookie = Struct.new(:domain, :include_subdomains, :path, :secure, :expires, :name, :value, :http_only,
                        keyword_init: true)

    module_function

    # Sets every transport option given (not nil) on a request pointer.
    def apply(pointer, options)
      options.each do |name, value|
        next if value.nil?

        option, = OPTIONS.fetch(name)
        convert(name, value).each do |converted|
          code = if converted.is_a?(String)
                   Native.rq_request_set_option_string(pointer, option, converted)
                 else
                   Native.rq_request_set_option_int(pointer, option, converted)
                 end
          RequestQueue.check(code, "#{name} #{value.inspect}")
        end
      end
    end

    def convert(name, value)
      kind = OPTIONS.fetch(name)[1]
      case name
      when :tls_min_version
        [TLS_VERSIONS.fetch(value.to_s) { raise ArgumentError, "tls_min_version must be one of #{TLS_VERSIONS.keys.join(", ")}, not #{value.inspect}" }]
      when :http_version
        [HTTP_VERSIONS.fetch(value.to_s) { raise ArgumentError, "http_version must be one of #{HTTP_VERSIONS.keys.join(", ")}, not #{value.inspect}" }]
      when :ip_version
        raise ArgumentError, "ip_version must be 4 or 6 (nil for either), not #{value.inspect}" unless [4, 6].include?(value)

        [value]
      when :resolve
        Array(value).map { |entry| string(name, entry) }
      when :no_proxy
        [string(name, value.is_a?(Array) ? value.join(",") : value)]
      else
        case kind
        when :bool
          raise TypeError, "#{name} must be true or false, not #{value.inspect}" unless [true, false].include?(value)

          [value ? 1 : 0]
        when :int
          raise ArgumentError, "#{name} must be an Integer >= 0, not #{value.inspect}" unless value.is_a?(Integer) && value >= 0 && value < 2**63

          [value]
        when :path
          value = value.to_path if value.respond_to?(:to_path)
          [string(name, value)]
        else
          [string(name, value)]
        end
      end
    end

    def string(name, value)
      raise TypeError, "#{name} must be a String, not #{value.class}" unless value.is_a?(String)
      raise ArgumentError, "#{name} contains a NUL byte" if value.include?("\0")

      value
    end

    # Configures a queue's defaults request from Request options (those of DEFAULT_OPTIONS),
    # with Request's own setters.
    def apply_defaults(pointer, defaults)
      unknown = defaults.keys - DEFAULT_OPTIONS
      raise ArgumentError, "defaults cannot hold #{unknown.join(", ")}; allowed: #{DEFAULT_OPTIONS.join(", ")}" unless unknown.empty?

      request = Request.allocate # a view of the defaults request: never added, never freed
      request.instance_variable_set(:@pointer, pointer)
      request.send(:set_headers, defaults[:headers]) if defaults[:headers]
      request.send(:set_seconds, :rq_request_set_timeout, :timeout, defaults[:timeout])
      request.send(:set_seconds, :rq_request_set_connect_timeout, :connect_timeout, defaults[:connect_timeout])
      request.send(:set_seconds, :rq_request_set_idle_timeout, :idle_timeout, defaults[:idle_timeout])
      request.send(:set_seconds, :rq_request_set_header_timeout, :header_timeout, defaults[:header_timeout])
      request.send(:set_low_speed_limit, defaults[:low_speed_limit]) unless defaults[:low_speed_limit].nil?
      request.send(:set_credentials, defaults[:credentials]) if defaults[:credentials]
      request.send(:set_count, :rq_request_set_max_redirects, :max_redirects, defaults[:max_redirects], 0xFFFF_FFFF)
      request.send(:set_count, :rq_request_set_max_response_size, :max_response_size, defaults[:max_response_size], 2**64 - 1)
      request.send(:set_ca_file, defaults[:ca_file]) if defaults[:ca_file]
      request.send(:set_retry, defaults[:retry]) if defaults.key?(:retry)
      apply(pointer, defaults.slice(*OPTIONS.keys))
    end

    def parse_cookies(text)
      text.each_line(chomp: true).filter_map do |line|
        http_only = line.start_with?("#HttpOnly_")
        line = line.delete_prefix("#HttpOnly_")
        parts = line.split("\t", -1)
        next if parts.size != 7 || line.start_with?("#")

        domain, sub, path, secure, expires, name, value = parts
        Cookie.new(domain: domain, include_subdomains: sub == "TRUE", path: path, secure: secure == "TRUE",
                   expires: expires.to_i, name: name, value: value, http_only: http_only).freeze
      end
    end
  end
end
