# frozen_string_literal: true

require "faraday"
require "requestqueue"

module RequestQueue
  # A Faraday adapter (Faraday 1.x, as Debian ships it, and 2.x), registered as :requestqueue:
  #
  #   require "requestqueue/faraday"
  #   conn = Faraday.new(url: "http://127.0.0.1:8000") { |f| f.adapter :requestqueue, max_concurrent: 8 }
  #   conn.get("/")                                  # one request, on the connection's queue
  #   conn.in_parallel do                            # all on one queue, at most 8 at once
  #     responses = urls.map { |u| conn.get(u) }
  #   end                                            # responses are complete here
  #
  # Adapter options: those of Queue.new (max_concurrent: (default 8), max_per_host:, mode:,
  # rate_limit: [starts, interval] or {starts:, per:, per_host:}) and request options applied to
  # every request (retry:, priority:, tag:, max_response_size:, ca_file: and the transport options
  # of Request: user_agent:, proxy:, client_cert:, resolve:, http_version:, cookies:, ...). Bodies
  # are decoded (gzip, deflate, br, zstd) and lose their Content-Encoding and Content-Length (a
  # HEAD, 204 or 304 keeps them: nothing was decoded). The queue allows
  # duplicates: every request is sent.
  #
  # The requests of one connection share its adapter's queue, so its limits hold across threads
  # and fibers that use the connection at once (each call waits for its own request, dispatching
  # the queue meanwhile); an `in_parallel` block runs on a queue of its own with the same options.
  #
  # Mapped from Faraday: request.timeout (what the three below do not set), open_timeout (connect),
  # read_timeout (the response-header limit, and the idle limit of a request without a body: no
  # byte received or sent for that long) and write_timeout (with a body, the idle limit is the
  # longer of the two),
  # ssl.ca_file, ssl.ca_path (ca_dir), ssl.min_version (:TLS1_2 or "TLSv1_2": tls_min_version),
  # ssl.verify = false (unsafe_no_tls_verify: certificates are not checked; ssl.client_cert and
  # client_key objects are refused: give the adapter client_cert:/client_key: files), proxy
  # (uri, user, password; Faraday fills it from http_proxy & co), on_data (streaming: the 2xx body
  # piece by piece as it arrives; another body in one piece at the end; env.status and
  # env.response_headers are set from the response's head, before the first piece, for an on_data
  # that takes the env as its third argument, as Faraday 2 passes it).
  # The reason phrase is not kept by the library: env.reason_phrase is nil.
  # Faraday's middleware follows redirects if you add it (the adapter follows none). Errors are
  # Faraday's: ConnectionFailed (refused, unknown host, connection lost, cancelled),
  # TimeoutError, SSLError. Request bodies are sent as one buffer (an IO is read whole first).
  class FaradayAdapter < ::Faraday::Adapter
    self.supports_parallel = true

    QUEUE_OPTIONS = %i[max_concurrent max_per_host mode rate_limit].freeze
    # (decode_content: the adapter decodes bodies and drops their Content-Encoding, as Faraday's
    # net_http adapter does.)
    REQUEST_OPTIONS = (%i[retry priority tag max_response_size ca_file] + Transport::OPTIONS.keys - [:decode_content]).freeze
    # Content-Encodings that libcurl decodes (a list of them, "deflate, gzip", too): the response
    # no longer has them.
    DECODED = %w[gzip x-gzip deflate br zstd].freeze
    # Faraday's names of TLS versions (ssl.min_version: :TLS1_2, "TLSv1_2") as the library's.
    FARADAY_TLS_VERSIONS = { "TLS1" => "1.0", "TLS1_1" => "1.1", "TLS1_2" => "1.2", "TLS1_3" => "1.3" }.freeze

    # Headers that describe the connection or the framing: libcurl sets its own.
    SKIPPED_HEADERS = %w[connection keep-alive transfer-encoding content-length].freeze

    # Runs the requests of a `conn.in_parallel` block on one queue.
    class ParallelManager
      def initialize(options = {})
        @options = options
        @queue = nil
        @errors = []
      end

      # The queue of this parallel block (created with the options of the first adapter using it).
      def queue(options = @options)
        @queue ||= FaradayAdapter.new_queue(options)
      end

      def add(request, &finish)
        request.on_complete do |response|
          finish.call(response)
        rescue StandardError => e # an error of one request does not stop the others
          @errors << e
        end
        queue << request
      end

      # Runs every request added; raises the first error (a Faraday error) once all have ended.
      def run
        return unless @queue

        @queue.run
        error = @errors.first
        raise error if error
      ensure
        @queue&.close
        @queue = nil
        @errors = []
      end
    end

    def self.setup_parallel_manager(options = {})
      ParallelManager.new(options)
    end

    def self.new_queue(options)
      queue_options = { max_concurrent: 8 }.merge(options.slice(:max_concurrent, :max_per_host, :mode))
      queue = Queue.new(**queue_options, duplicates: :allow)
      limit = options[:rate_limit]
      if limit.is_a?(Hash)
        queue.rate_limit(limit.fetch(:starts), per: limit.fetch(:per, 1.0), per_host: limit.fetch(:per_host, false))
      elsif limit
        queue.rate_limit(*limit)
      end
      queue
    end

    def initialize(app = nil, options = {}, &block)
      super
      options ||= {}
      unknown = options.keys - QUEUE_OPTIONS - REQUEST_OPTIONS
      raise ArgumentError, "requestqueue adapter: unknown option(s) #{unknown.join(", ")}" unless unknown.empty?

      @queue_options = options.slice(*QUEUE_OPTIONS)
      @request_options = options.slice(*REQUEST_OPTIONS)
      @queue = nil
      @queue_pid = nil
      @queue_lock = Mutex.new
    end

    # Closes the connection's queue (Faraday 2 calls it from Connection#close); a later request
    # makes a new one.
    def close
      queue = @queue_lock.synchronize { @queue.tap { @queue = nil } }
      queue&.close
    end

    def call(env)
      super
      streamed = { bytes: nil } # set once on_data has been given a piece of the body
      request = build_request(env, streamed)
      manager = env[:parallel_manager]
      if manager.is_a?(ParallelManager)
        manager.queue(@queue_options)
        manager.add(request) { |response| finish(env, response, streamed) }
      else
        queue = shared_queue
        queue << request
        wait_for(queue, request)
        finish(env, request.response, streamed)
      end
      @app.call(env)
    end

    # How often a call waiting for its request looks whether another thread or fiber dispatched
    # its completion (seconds).
    COMPLETION_CHECK = 0.05

    private

    def shared_queue
      @queue_lock.synchronize do
        # (A forked child leaves the parent's queue alone and makes its own.)
        @queue = nil if @queue && (@queue.closed? || @queue_pid != Process.pid)
        @queue_pid = Process.pid
        @queue ||= FaradayAdapter.new_queue(@queue_options)
      end
    end

    # Dispatches the queue until `request` has completed: the completion may be run by this call or
    # by another thread or fiber dispatching the same queue. Under a Fiber scheduler the wait lets
    # other fibers run. Interrupted (Ctrl-C, Thread#raise, a stopped Async task): the request is
    # cancelled.
    def wait_for(queue, request)
      until request.completed?
        queue.dispatch
        break if request.completed?

        queue.wait_readable(COMPLETION_CHECK)
      end
    rescue Exception # rubocop:disable Lint/RescueException -- re-raised: the request must not go on alone
      request.cancel unless request.completed?
      raise
    end

    def build_request(env, streamed)
      req = env[:request] || {}
      ssl = env[:ssl]
      options = @request_options.dup
      ssl_options(ssl, options) if ssl
      proxy = req[:proxy]
      if proxy && proxy[:uri] && !options.key?(:proxy)
        uri = URI(proxy[:uri].to_s)
        uri.user = userinfo_escape(proxy[:user]) if proxy[:user]
        uri.password = userinfo_escape(proxy[:password]) if proxy[:password]
        options[:proxy] = uri.to_s
      end
      headers = env[:request_headers].reject { |name, _| SKIPPED_HEADERS.include?(name.to_s.downcase) }
      body = env[:body]
      body = body.read if body.respond_to?(:read) # Faraday::CompositeReadIO (multipart), IO
      body = nil if body.is_a?(String) && body.empty? && !%i[post put patch].include?(env[:method])
      open, read, write = req.values_at(:open_timeout, :read_timeout, :write_timeout).map { |t| t || req[:timeout] }
      # The response must begin within the read timeout; without a body to write, it is the idle
      # limit too.
      idle = body.to_s.empty? ? read : [read, write].compact.max
      options[:connect_timeout] = open if open
      options[:idle_timeout] = idle if idle
      options[:header_timeout] = read if read
      request = Request.new(env[:url].to_s, method: env[:method], headers: headers, body: body,
                                            max_redirects: 0, **options)
      on_data = req[:on_data]
      if on_data
        request.on_head do |head|
          env.status = head.status
          env.response_headers = ::Faraday::Utils::Headers.new.update(response_headers(env, head))
        end
        request.on_body do |chunk, offset|
          streamed[:bytes] = offset + chunk.bytesize
          deliver(on_data, chunk, streamed[:bytes], env)
        end
      end
      request
    rescue RequestQueue::CallError => e
      raise ::Faraday::ConnectionFailed, e
    end

    # The headers of a response or head for Faraday: without Content-Encoding and Content-Length
    # when libcurl decodes the body.
    def response_headers(env, response)
      headers = response.headers.to_h
      return headers unless decoded?(env, response)

      headers.reject { |name, _| %w[content-encoding content-length].include?(name.to_s.downcase) }
    end

    # Whether libcurl decoded the body of `response` (a HEAD, 204 or 304 has none: its
    # Content-Encoding and Content-Length stay, as net_http leaves them).
    def decoded?(env, response)
      return false if env[:method] == :head || [204, 304].include?(response.status)

      codings = response["content-encoding"].to_s.downcase.split(",").map(&:strip).reject(&:empty?)
      codings.any? { |coding| DECODED.include?(coding) } &&
        codings.all? { |coding| DECODED.include?(coding) || coding == "identity" }
    end

    # Faraday's ssl options as request options. Certificate and key objects cannot be handed to
    # libcurl: refused rather than left out (the server would refuse the connection instead).
    def ssl_options(ssl, options)
      options[:ca_file] = ssl[:ca_file] if ssl[:ca_file]
      options[:ca_dir] = ssl[:ca_path] if ssl[:ca_path]
      options[:unsafe_no_tls_verify] = true if ssl[:verify] == false
      if ssl[:min_version]
        options[:tls_min_version] = FARADAY_TLS_VERSIONS.fetch(ssl[:min_version].to_s.upcase.delete("V")) do
          raise ArgumentError, "requestqueue adapter: ssl.min_version #{ssl[:min_version].inspect} is not one of " \
                               "#{FARADAY_TLS_VERSIONS.keys.map(&:to_sym).map(&:inspect).join(", ")}"
        end
      end
      %i[client_cert client_key].each do |name|
        next unless ssl[name]

        raise ArgumentError, "requestqueue adapter: ssl.#{name} (an OpenSSL object) cannot be used; give the " \
                             "adapter the files instead: f.adapter :requestqueue, client_cert: \"cert.pem\", " \
                             "client_key: \"key.pem\" (key_password: if it is encrypted)"
      end
    end

    # A proxy user or password percent-encoded for the URL's user information, which libcurl
    # decodes (a form's "+" for a space would reach the proxy as "+").
    def userinfo_escape(text)
      URI.encode_www_form_component(text.to_s).gsub("+", "%20")
    end

    # Faraday 2 passes the env as a third argument to an on_data that takes it.
    def deliver(on_data, chunk, size, env)
      on_data.arity == 2 ? on_data.call(chunk, size) : on_data.call(chunk, size, env)
    end

    def finish(env, response, streamed)
      case response.outcome
      when :ok, :http_status
        body = response.body.dup # (not frozen, as other adapters' bodies; the bytes are shared until changed)
        on_data = env[:request] && env[:request][:on_data]
        if on_data
          # A body that was not streamed (not a 2xx) goes to on_data in one piece.
          deliver(on_data, body, body.bytesize, env) if streamed[:bytes].nil? && !body.empty?
          body = +""
        end
        save_response(env, response.status, body, response_headers(env, response))
        # In a parallel block Faraday leaves finishing the response (its on_complete callbacks) to
        # the adapter.
        env.response.finish(env) if env.parallel? && !env.response.finished?
      when :timeout
        raise ::Faraday::TimeoutError, response.error_message
      when :tls
        raise ::Faraday::SSLError, response.error_message
      else
        raise ::Faraday::ConnectionFailed, "#{response.outcome}: #{response.error_message}"
      end
    end
  end
end

::Faraday::Adapter.register_middleware(requestqueue: RequestQueue::FaradayAdapter)
