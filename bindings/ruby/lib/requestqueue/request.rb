# frozen_string_literal: true

require "uri"

module RequestQueue
  # One HTTP exchange. Build it with Queue#add (which creates and adds it at once), or with
  # Request.new and then Queue#add / Queue#<<. A request is single-use: it can be added once.
  #
  #   request = RequestQueue::Request.new("http://127.0.0.1:8080/upload",
  #                                       method: :post, body: "data", timeout: 10)
  #   request.on_complete { |response| ... }
  #   request.on_upload_progress { |fraction, done, total| ... }
  #   queue << request
  #
  # Options (all optional):
  #   method:           "GET" (default), "POST", ...; upcased (:post and "post" are "POST")
  #   headers:          Hash or Array of [name, value]; a nil value removes a header
  #   body:             String (sent byte for byte), a File/IO (read whole when the request is
  #                     built), or a Hash/Array sent form-encoded as Faraday does (nested hashes
  #                     as a[b]=1, arrays as a[]=1) with Content-Type
  #                     application/x-www-form-urlencoded, or multipart/form-data when a value is
  #                     a File/IO (see Form), unless a Content-Type is given
  #   json:             any value JSON.generate takes, sent as the body with Content-Type
  #                     application/json (unless a Content-Type is given); not with body:
  #   params:           Hash or Array appended to the URL's query string, form-encoded (nested)
  #   timeout:          total seconds per attempt (0 = no limit, the default)
  #   connect_timeout:  seconds to connect (default 30)
  #   idle_timeout:     seconds without a byte before giving up (default 60, 0 = off)
  #   header_timeout:   seconds after the request was sent for the response headers to be
  #                     complete (default: the idle timeout, 0 = off)
  #   low_speed_limit:  [bytes_per_second, seconds]: fewer bytes per second than that, averaged
  #                     over that window, give up (default [1, the idle timeout]; 0 in either
  #                     = off). The last two follow idle_timeout: unless given. Every limit ends
  #                     the attempt with a TimeoutError whose message names it
  #   credentials:      [user, password] sent as Basic auth with the first attempt
  #   max_redirects:    redirects followed (default 10; 0 delivers the 3xx response itself)
  #   max_response_size: bytes; a larger body ends the attempt with :response_too_large
  #   ca_file:          PEM file of CA certificates to verify TLS servers with (always verified)
  #   retry:            true (retry timeouts and connection failures every 5 s, without limit),
  #                     an Integer (the most attempts, first included), or a Hash with
  #                     :attempts (Integer, 0 = unlimited), :delay (seconds before the first
  #                     retry), :on (outcome Symbols such as :timeout, :connection_lost,
  #                     :cannot_connect, :http_status), :statuses (HTTP statuses such as
  #                     [429, 503]), :backoff (delay multiplier per retry, default 1), :max_delay
  #                     (cap in seconds, 0 = none), :jitter (0..1) and :non_idempotent (true to
  #                     allow retrying POST, PATCH, ...)
  #   priority:         :very_low, :low, :normal (default), :high, :very_high (or -2..2)
  #   tag:              a String to count, list or cancel requests by (Queue#count(tag:), ...)
  #   output_file:      write a 2xx body into this file instead of the response (resume: true
  #                     continues a partial file with a Range request)
  #   on_complete, on_download_progress, on_upload_progress, on_auth, on_body, on_head:
  #                     callables, as the block methods of the same names
  # Transport options (unset: the queue's defaults, else the library's; see requestqueue.h):
  #   decode_content:   false to receive bodies as sent (default true: Accept-Encoding gzip,
  #                     deflate, br, zstd, bodies decoded)
  #   user_agent:       the User-Agent ("" sends none; default "librequestqueue/V libcurl/V")
  #   proxy:            http://, https://, socks4(a)://, socks5:// or socks5h:// URL, with
  #                     user:password@ if needed; "" uses none, not even http_proxy & co from
  #                     the environment (honoured by default, as curl does)
  #   no_proxy:         hosts reached directly (String "a,b" or Array)
  #   proxy_ca_file:    PEM file of CAs for an https:// proxy's certificate
  #   client_cert, client_key, key_password:  TLS client certificate and key (PEM files)
  #   pinned_public_key: "sha256//base64" or a key file; ca_dir: a c_rehash folder of CAs
  #   tls_min_version:  "1.0", "1.1", "1.2" or "1.3"
  #   unsafe_no_tls_verify: true turns certificate verification off (curl -k): test servers only
  #   unix_socket:      connect to this Unix socket path instead of the URL's host
  #   resolve:          "host:port:address" (or an Array of them), as curl --resolve
  #   interface:        local interface or address to connect from; ip_version: 4 or 6
  #   tcp_keepalive:    seconds between keep-alive probes (0 = off)
  #   max_recv_speed, max_send_speed:  bytes per second
  #   http_version:     "1.1", "2" (default: HTTP/2 over TLS when offered) or "2-prior-knowledge"
  #   cookies:          true to use the queue's cookie jar (Queue#cookies)
  class Request
    OPTIONS = %i[method headers body json params timeout connect_timeout idle_timeout header_timeout
                 low_speed_limit credentials retry
                 max_redirects max_response_size ca_file priority tag output_file resume
                 on_complete on_download_progress on_upload_progress on_auth on_body on_head].freeze +
              Transport::OPTIONS.keys
    CALLBACKS = %i[on_complete on_download_progress on_upload_progress on_auth on_body on_head].freeze
    RETRY_OPTIONS = %i[attempts delay on statuses backoff max_delay jitter non_idempotent].freeze

    attr_reader :url, :http_method, :response, :queue, :tag

    # The out-parameter of rq_add_url, taken from ADD_OUT and given back by each add (Array#pop and
    # #push are atomic; two threads never share one).
    ADD_OUT = []
    # Results of rq_add_url about its URL (raised as Request.new raises them); the others are about
    # the queue (raised as Queue#add raises them for a Request).
    URL_RESULTS = [4, 5, 16].freeze # invalid_url, unsupported_scheme, out_of_memory
    # A frozen String body of at least this many bytes is read in place by the library (see
    # #set_body); a smaller one is copied (cheap). Above the largest String Ruby 3.x embeds in an
    # object slot (23 bytes in 3.1, at most 640-byte slots with variable-width allocation in 3.2+),
    # whose bytes compaction could move.
    BORROW_MIN = 4096
    private_constant :ADD_OUT, :URL_RESULTS, :BORROW_MIN

    # Queue#add of a URL without options (the common request): the request made, given its
    # completion and added in one library call (rq_add_url) instead of three, with the results and
    # exceptions of Request.new followed by Queue#add. `queue_pointer` is the queue's handle,
    # whether or not it is closed: the URL is checked first, as Request.new checks it first.
    def self.add_url(url, on_complete, queue, queue_state, queue_pointer) # :nodoc:
      request = allocate
      request.__send__(:add_url, url, on_complete, queue, queue_state, queue_pointer)
    end

    def initialize(url, **options, &on_complete)
      unless options.empty?
        unknown = options.keys - OPTIONS
        raise ArgumentError, "unknown option#{"s" if unknown.size > 1}: #{unknown.join(", ")}" unless unknown.empty?
      end

      @url = build_url(url, options[:params])
      out = FFI::MemoryPointer.new(:pointer)
      RequestQueue.check(Native.rq_request_new(@url, out), "URL #{@url.inspect}")
      # Released after the Request is garbage collected, by the reaper (never in the finalizer
      # itself); also in a forked child, which the library allows (see "Fork" in requestqueue.h).
      @pointer = FFI::AutoPointer.new(out.read_pointer, Reaper::REQUEST_RELEASER)
      @key = object_id # (see Callbacks)
      @http_method = "GET"
      @queue = nil
      @response = nil
      @callbacks = {}
      @submit_lock = Mutex.new

      on_complete(&on_complete) if on_complete
      configure(options) unless options.empty? # (most requests: a URL and a block)
    end

    # The options of Request.new, in the order they are applied.
    def configure(options)
      self.http_method = options[:method] if options.key?(:method)
      set_headers(options[:headers]) if options[:headers]
      if options.key?(:json)
        raise ArgumentError, "give either body: or json:, not both" unless options[:body].nil?

        set_json(options[:json])
      elsif options.key?(:body) && !options[:body].nil?
        set_body(options[:body])
      end
      set_seconds(:rq_request_set_timeout, :timeout, options[:timeout])
      set_seconds(:rq_request_set_connect_timeout, :connect_timeout, options[:connect_timeout])
      set_seconds(:rq_request_set_idle_timeout, :idle_timeout, options[:idle_timeout])
      set_seconds(:rq_request_set_header_timeout, :header_timeout, options[:header_timeout])
      set_low_speed_limit(options[:low_speed_limit]) unless options[:low_speed_limit].nil?
      set_credentials(options[:credentials]) if options[:credentials]
      set_count(:rq_request_set_max_redirects, :max_redirects, options[:max_redirects], 0xFFFF_FFFF)
      set_count(:rq_request_set_max_response_size, :max_response_size, options[:max_response_size], 2**64 - 1)
      set_ca_file(options[:ca_file]) if options[:ca_file]
      Transport.apply(@pointer, options.slice(*Transport::OPTIONS.keys))
      set_retry(options[:retry]) if options.key?(:retry)
      self.priority = options[:priority] if options.key?(:priority)
      set_tag(options[:tag]) if options[:tag]
      set_output_file(options[:output_file], options[:resume]) if options[:output_file]
      raise ArgumentError, "resume: needs output_file:" if options[:resume] && !options[:output_file]

      CALLBACKS.each { |name| set_callback(name, options[name]) if options[name] } # (after the block)
    end
    private :configure

    # The block called once with the Response when the request completes, whatever the outcome
    # (ok, HTTP status error, timeout, cancelled, ...). Returns self.
    def on_complete(&block)
      set_callback(:on_complete, block)
    end

    # The block called as the body downloads: |fraction, done, total|. fraction is within
    # [0, 1], or nil while the total is unknown (then total is nil too); done counts bytes.
    # A final call reports 1.0 after a success. Returns self.
    def on_download_progress(&block)
      set_callback(:on_download_progress, block)
    end

    # The same for the upload of the body (only requests with a body report it).
    def on_upload_progress(&block)
      set_callback(:on_upload_progress, block)
    end

    # The block called with an AuthChallenge when the server answers 401. It must answer it
    # exactly once, now or later: challenge.use_credential(user, password),
    # challenge.continue_without or challenge.cancel. If the block raises, the request is
    # cancelled and the exception is raised from Queue#run. Without this block a 401 completes
    # the request with an HTTPStatusError. Returns self.
    def on_auth(&block)
      set_callback(:on_auth, block)
    end

    # The block called with each piece of a 2xx response body as it arrives, instead of
    # collecting it: |chunk, offset| (a binary String, and its position in the body of the
    # current attempt; 0 again when a retry starts the body over). After a success the
    # Response's body is empty. Memory stays bounded: while about 1 MiB waits for dispatch, the
    # transfer pauses. If the block raises, the request is cancelled and the exception is raised
    # from Queue#run. Not with output_file:. Returns self.
    def on_body(&block)
      set_callback(:on_body, block)
    end

    # The block called with the head of the response as soon as its headers have arrived, before
    # its body (on_body pieces) and the completion: a Response with the status, headers and url
    # of the final response of an attempt (not of a redirect that is followed, nor of a 401
    # answered by on_auth), an empty body, and the outcome :http_status for a status >= 400.
    # Each attempt of a retried request brings its own; on_body pieces follow only a 2xx head.
    # Returns self.
    def on_head(&block)
      set_callback(:on_head, block)
    end

    # :very_low, :low, :normal, :high or :very_high.
    def priority
      out = FFI::MemoryPointer.new(:int)
      RequestQueue.check(Native.rq_request_get_priority(handle, out))
      Native::PRIORITIES.key(out.read(:int))
    end

    # May change while the request waits: it moves to its new level. No effect once running.
    def priority=(value)
      level = value.is_a?(Integer) ? value : Native::PRIORITIES[value]
      unless level
        low, high = Native::PRIORITIES.values.minmax
        raise ArgumentError, "priority must be one of #{Native::PRIORITIES.keys.map(&:inspect).join(", ")} or #{low}..#{high}, not #{value.inspect}"
      end

      RequestQueue.check(Native.rq_request_set_priority(handle, level), "priority #{value.inspect}")
    end

    # :new, :waiting, :running or :completed.
    def state
      out = FFI::MemoryPointer.new(:int)
      RequestQueue.check(Native.rq_request_get_state(handle, out))
      Native::STATES.fetch(out.read(:int))
    end

    # True once the completion has been delivered (then #response is set).
    def completed?
      !@response.nil?
    end

    # Cancels the request if it is waiting or running: its completion then says :cancelled.
    # Returns true if this call cancelled it, false if it was not active (never added, or
    # already completed).
    def cancel
      rc = Native.rq_cancel(handle)
      return false if rc == NotActiveError::CODE

      RequestQueue.check(rc)
      true
    end

    def inspect
      "#<#{self.class} #{@http_method} #{@url}#{" completed" if completed?}>"
    end

    # ---- Used by Queue and the callback trampolines ------------------------------------

    # The registry key and the context of the request's callbacks (see Callbacks).
    attr_reader :key # :nodoc:
    # The Queue::State of the queue it was added to.
    attr_reader :queue_state # :nodoc:

    def callback(name) # :nodoc:
      @callbacks[name]
    end

    # Adds the request to a native queue. Called by Queue#add with the queue's state.
    def submit(queue, queue_state, queue_pointer) # :nodoc:
      # (A request made by Request.add_url has no lock: it was added when it was made.)
      lock = @submit_lock or raise AlreadyAddedError, "this request was already added to a queue"
      lock.synchronize do
        raise AlreadyAddedError, "this request was already added to a queue" if @queue

        ptr = @pointer
        RequestQueue.check(Native.rq_request_set_completion_keyed(ptr, Callbacks::COMPLETION, @key, nil))
        # Only the callbacks given are set (a new handle has none; a block is never taken away).
        unless @callbacks.empty?
          if @callbacks[:on_download_progress]
            RequestQueue.check(Native.rq_request_set_download_progress(ptr, Callbacks::DOWNLOAD_PROGRESS))
          end
          if @callbacks[:on_upload_progress]
            RequestQueue.check(Native.rq_request_set_upload_progress(ptr, Callbacks::UPLOAD_PROGRESS))
          end
          RequestQueue.check(Native.rq_request_set_auth_handler(ptr, Callbacks::AUTH)) if @callbacks[:on_auth]
          if @callbacks[:on_body]
            RequestQueue.check(Native.rq_request_set_body_callback(ptr, Callbacks::BODY), "on_body")
          end
          RequestQueue.check(Native.rq_request_set_head_callback(ptr, Callbacks::HEAD)) if @callbacks[:on_head]
        end
        @queue = queue
        @queue_state = queue_state
        Callbacks.register(self, queue_state)
        Callbacks::HELD_BODIES[@key] = @body if @body
        rc = Native.rq_add(queue_pointer, ptr)
        return self if rc == Native::RQ_OK

        Callbacks::HELD_BODIES.delete(@key)
        Callbacks.unregister(self, queue_state)
        @queue = @queue_state = nil
        RequestQueue.check(rc)
      end
    end

    # The address of the native handle (nil while a Request.add_url has not returned it).
    def handle_address # :nodoc:
      @pointer&.address || @seen_handle
    end

    # Called with the request's native handle (an Integer) by its completion. A request made by
    # Request.add_url may complete on another thread before rq_add_url has returned its handle
    # here; its completion block may then use it (state, cancel, priority), borrowed: the handle is
    # freed only after the add has made its AutoPointer.
    def handle_seen(handle) # :nodoc:
      @seen_handle = handle unless @pointer
    end

    # Records the final response and drops the callbacks (nothing is called after this).
    # Returns the completion block, if any.
    def finish(response) # :nodoc:
      @response = response
      callbacks = @callbacks
      @callbacks = {}.freeze
      callbacks[:on_complete]
    end

    private

    def add_url(url, on_complete, queue, queue_state, queue_pointer)
      @url = build_url(url, nil)
      @http_method = "GET"
      @response = nil
      @callbacks = on_complete ? { on_complete: on_complete } : {}
      @submit_lock = nil
      @key = object_id
      @queue = queue
      @queue_state = queue_state
      Callbacks.register(self, queue_state) # (before the call: it may complete on another thread at once)
      out = ADD_OUT.pop || FFI::MemoryPointer.new(:pointer)
      begin
        rc = Native.rq_add_url_keyed(queue_pointer, @url, Callbacks::COMPLETION, @key, nil, out)
        if rc == Native::RQ_OK
          @pointer = FFI::AutoPointer.new(out.read_pointer, Reaper::REQUEST_RELEASER)
          return self
        end
      rescue Exception # rubocop:disable Lint/RescueException -- (a URL with a NUL byte: ArgumentError)
        Callbacks.unregister(self, queue_state)
        raise
      ensure
        ADD_OUT.push(out)
      end
      Callbacks.unregister(self, queue_state)
      @queue = @queue_state = nil
      RequestQueue.check(rc, "URL #{@url.inspect}") if URL_RESULTS.include?(rc)
      raise QueueClosedError, "the queue is closed" if queue_state.closed # (as Queue#add's check)

      RequestQueue.check(rc)
    end

    # The native handle (see #handle_seen).
    def handle
      @pointer || FFI::Pointer.new(@seen_handle)
    end

    def build_url(url, params)
      url = url.to_s if url.is_a?(URI::Generic)
      raise TypeError, "URL must be a String or URI, not #{url.class}" unless url.is_a?(String)
      return url if params.nil? || (params.respond_to?(:empty?) && params.empty?)

      query = params.is_a?(String) ? params : Form.query(params)
      separator = if url.include?("?")
                    url.end_with?("?", "&") ? "" : "&"
                  else
                    "?"
                  end
      "#{url}#{separator}#{query}"
    end

    def http_method=(value)
      raise TypeError, "method must be a String or Symbol, not #{value.class}" unless value.is_a?(String) || value.is_a?(Symbol)

      value = value.to_s.upcase # as Typhoeus, Faraday and Net::HTTP: "post" is a POST

      RequestQueue.check(Native.rq_request_set_method(@pointer, value), "method #{value.inspect}")
      @http_method = value
    end

    # A name given more than once (in any case), or with an Array of values, is sent once, its values
    # joined by ", " ("; " for Cookie), as RFC 9110 5.3 allows and Net::HTTP does: the library sends a
    # name once (a later one replaces it). nil removes what came before it.
    def set_headers(headers)
      pairs = headers.respond_to?(:each_pair) ? headers.each_pair.to_a : Array(headers)
      merged = {}
      pairs.each do |pair|
        raise TypeError, "headers must be a Hash or an Array of [name, value] pairs" unless pair.is_a?(Array) && pair.size == 2

        name, value = pair
        name = name.to_s
        key = name.downcase
        separator = key == "cookie" ? "; " : ", "
        value = value.is_a?(Array) ? value.join(separator) : value&.to_s
        first = merged[key]
        merged[key] = if first && first[1] && value
                        [first[0], "#{first[1]}#{separator}#{value}"]
                      else
                        [first ? first[0] : name, value]
                      end
      end
      merged.each_value do |name, value|
        @content_type = true if name.casecmp?("content-type") && value
        RequestQueue.check(Native.rq_request_set_header(@pointer, name, value), "header #{name.inspect}")
      end
    end

    def set_body(body)
      if body.is_a?(Hash) || body.is_a?(Array)
        body, content_type = Form.encode(body)
        RequestQueue.check(Native.rq_request_set_header(@pointer, "Content-Type", content_type)) unless @content_type
      elsif body.respond_to?(:read) # a File or IO: read whole (the library takes one buffer)
        body = Form.read(body)
      end
      raise TypeError, "body must be a String, IO, Hash or Array, not #{body.class}" unless body.is_a?(String)

      if body.empty?
        RequestQueue.check(Native.rq_request_set_body(@pointer, nil, 0))
      elsif body.frozen? && body.bytesize >= BORROW_MIN
        # Read in place by the library (no copy): a frozen String cannot change, this request holds
        # it (@body) while it lives and Callbacks::HELD_BODIES from the add until its completion, and
        # its bytes, too large to be embedded in the object's slot, are a heap buffer that
        # compaction (GC.compact) does not move. (ffi passes a String argument as its own bytes.)
        RequestQueue.check(Native.rq_request_set_body_borrowed(@pointer, body, body.bytesize))
        @body = body
      else
        # Copied by the library during the call (ffi passes the String's own bytes, no copy on
        # this side): a String that is not frozen may change after this.
        RequestQueue.check(Native.rq_request_set_body(@pointer, body, body.bytesize))
      end
    end

    # json: the value as a JSON body, with Content-Type application/json unless one is given.
    def set_json(value)
      require "json"
      RequestQueue.check(Native.rq_request_set_header(@pointer, "Content-Type", "application/json")) unless @content_type
      set_body(JSON.generate(value))
    end

    def set_seconds(function, name, value)
      return if value.nil?
      raise TypeError, "#{name} must be a number of seconds, not #{value.class}" unless value.is_a?(Numeric)

      RequestQueue.check(Native.public_send(function, @pointer, value.to_f), "#{name} #{value.inspect}")
    end

    def set_low_speed_limit(value)
      unless value.is_a?(Array) && value.size == 2 && value.all?(Numeric)
        raise TypeError, "low_speed_limit must be [bytes_per_second, seconds], not #{value.inspect}"
      end

      rate, seconds = value
      RequestQueue.check(Native.rq_request_set_low_speed_limit(@pointer, rate.to_f, seconds.to_f),
                         "low_speed_limit #{value.inspect}")
    end

    def set_count(function, name, value, max)
      return if value.nil?
      unless value.is_a?(Integer) && value >= 0 && value <= max
        raise ArgumentError, "#{name} must be an Integer >= 0, not #{value.inspect}"
      end

      RequestQueue.check(Native.public_send(function, @pointer, value), "#{name} #{value}")
    end

    def set_ca_file(path)
      path = path.to_path if path.respond_to?(:to_path)
      raise TypeError, "ca_file must be a path (String or Pathname), not #{path.class}" unless path.is_a?(String)

      RequestQueue.check(Native.rq_request_set_ca_file(@pointer, path), "ca_file #{path.inspect}")
    end

    def set_tag(tag)
      raise TypeError, "tag must be a String, not #{tag.class}" unless tag.is_a?(String)

      RequestQueue.check(Native.rq_request_set_tag(@pointer, tag), "tag #{tag.inspect}")
      @tag = tag.dup.freeze
    end

    def set_output_file(path, resume)
      path = path.to_path if path.respond_to?(:to_path)
      raise TypeError, "output_file must be a path (String or Pathname), not #{path.class}" unless path.is_a?(String)

      RequestQueue.check(Native.rq_request_set_output_file(@pointer, path, resume ? 1 : 0),
                         "output_file #{path.inspect}")
    end

    def set_credentials(credentials)
      user, password = credentials.is_a?(String) ? credentials.split(":", 2) : credentials
      unless user.is_a?(String) && (password.nil? || password.is_a?(String))
        raise TypeError, "credentials must be [user, password] or \"user:password\""
      end

      RequestQueue.check(Native.rq_request_set_credentials(@pointer, user, password || ""))
    end

    def set_retry(value)
      case value
      when nil, false
        RequestQueue.check(Native.rq_request_set_retry(@pointer, 0))
      when true
        RequestQueue.check(Native.rq_request_set_retry(@pointer, 1))
      when Integer
        set_attempts(value)
        RequestQueue.check(Native.rq_request_set_retry(@pointer, 1))
      when Hash
        unknown = value.keys - RETRY_OPTIONS
        raise ArgumentError, "unknown retry option#{"s" if unknown.size > 1}: #{unknown.join(", ")}" unless unknown.empty?

        set_attempts(value[:attempts]) if value.key?(:attempts)
        set_seconds(:rq_request_set_retry_delay, :"retry delay", value[:delay])
        set_retry_outcomes(value[:on]) if value.key?(:on)
        set_retry_statuses(value[:statuses]) if value.key?(:statuses)
        set_backoff(value) if value.key?(:backoff) || value.key?(:max_delay) || value.key?(:jitter)
        if value.key?(:non_idempotent)
          RequestQueue.check(Native.rq_request_set_retry_non_idempotent(@pointer, value[:non_idempotent] ? 1 : 0))
        end
        RequestQueue.check(Native.rq_request_set_retry(@pointer, 1))
      else
        raise TypeError, "retry must be true, false, an Integer or a Hash, not #{value.class}"
      end
    end

    def set_attempts(count)
      unless count.is_a?(Integer) && count >= 0 && count <= 0xFFFF_FFFF
        raise ArgumentError, "retry attempts must be an Integer >= 0 (0 = unlimited), not #{count.inspect}"
      end

      RequestQueue.check(Native.rq_request_set_max_attempts(@pointer, count), "retry attempts #{count}")
    end

    def set_retry_statuses(statuses)
      statuses = Array(statuses)
      unless statuses.all? { |code| code.is_a?(Integer) && code.between?(-2**31, 2**31 - 1) }
        raise TypeError, "retry statuses must be Integers such as 429 or 503, not #{statuses.inspect}"
      end

      buffer = FFI::MemoryPointer.new(:int, [statuses.size, 1].max)
      buffer.write_array_of_int(statuses) unless statuses.empty?
      RequestQueue.check(Native.rq_request_set_retry_statuses(@pointer, statuses.empty? ? nil : buffer, statuses.size),
                         "retry statuses #{statuses.inspect}")
    end

    def set_backoff(options)
      numbers = %i[backoff max_delay jitter].to_h { |k| [k, options.fetch(k, k == :backoff ? 1 : 0)] }
      numbers.each do |name, number|
        raise TypeError, "retry #{name} must be a number, not #{number.class}" unless number.is_a?(Numeric)
      end
      RequestQueue.check(Native.rq_request_set_retry_backoff(@pointer, numbers[:backoff].to_f,
                                                             numbers[:max_delay].to_f, numbers[:jitter].to_f),
                         "retry backoff #{numbers.inspect}")
    end

    def set_retry_outcomes(outcomes)
      codes = Array(outcomes).map do |outcome|
        Native::OUTCOMES.index(outcome) or
          raise ArgumentError, "unknown outcome #{outcome.inspect} (known: #{Native::OUTCOMES.join(", ")})"
      end
      if codes.empty?
        RequestQueue.check(Native.rq_request_set_retry_outcomes(@pointer, nil, 0))
      else
        buffer = FFI::MemoryPointer.new(:int, codes.size)
        buffer.write_array_of_int(codes)
        RequestQueue.check(Native.rq_request_set_retry_outcomes(@pointer, buffer, codes.size),
                           "retry on #{outcomes.inspect}")
      end
    end

    def set_callback(name, callable)
      raise TypeError, "#{name} needs a block or an object that responds to #call" unless callable.respond_to?(:call)
      raise RequestFrozenError, "the request was already added: its callbacks can no longer change" if @queue || completed?

      @callbacks[name] = callable
      self
    end
  end
end
