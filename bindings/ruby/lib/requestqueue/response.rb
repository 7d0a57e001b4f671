# frozen_string_literal: true

module RequestQueue
  # The result of a request. Immutable. A completion's Response copies its outcome, status, HTTP
  # version and body during the callback (they come as its arguments), and keeps the library's
  # response (retained for it) to read its headers, URL, message, attempts and metrics from when
  # they are first asked for; the reaper releases it once the Response is garbage (Reaper). A body
  # above EAGER_BODY bytes copies everything at once instead, so that the library's copy of a large body is not held
  # until the collector runs. An on_head block's Response and AuthChallenge#response are copied
  # whole during their callback.
  #
  #   response.ok?          # true for the outcome :ok (an HTTP status below 400)
  #   response.outcome      # :ok, :cancelled, :http_status, :timeout, :connection_lost, ...
  #   response.status       # 200; 0 when no response was received
  #   response.body         # binary String (Encoding::BINARY)
  #   response.headers      # {"Content-Type" => "text/plain", ...}: a Headers (case-insensitive
  #                         # Hash; repeated headers joined with ", ")
  #   response.header_pairs # [["Content-Type", "text/plain"], ...] in the order received
  #   response.code         # the status (as Typhoeus names it)
  #   response.json         # the body parsed as JSON
  #   response.text         # the body decoded with its charset (UTF-8 by default), as UTF-8
  #   response["content-type"]  # first header of that name, case-insensitive, or nil
  #   response.url          # the effective URL, after redirects
  #   response.error        # nil, or the RequestError subclass instance for the outcome
  #   response.value!       # self when ok?, else raises #error
  #   response.metrics      # timings and byte counts (a Metrics)
  class Response
    # Figures of the request (rq_metrics). Times in seconds, nil where they do not apply (no
    # attempt started, no TLS, step not reached): queued (waiting in the queue), then from the
    # start of the last attempt dns, connect, tls, first_byte and total; bytes_down and bytes_up
    # (body bytes of the last attempt, as delivered); attempts; connection_reused (true when the
    # last attempt reused a connection opened by an earlier request); wire_bytes_down (the body as
    # it came from the server, chunked framing not counted: differs from bytes_down when a
    # compressed body was decoded); header_bytes_down (status and header lines of every response
    # of the last attempt, redirects included); http_version (as Response#http_version).
    Metrics = Struct.new(:queued, :dns, :connect, :tls, :first_byte, :total, :bytes_down, :bytes_up,
                         :attempts, :connection_reused, :wire_bytes_down, :header_bytes_down,
                         :http_version, keyword_init: true)

    attr_reader :outcome, :status, :body, :request
    # The HTTP version of the response: 10, 11, 20 (HTTP/2) or 30; 0 when none was received.
    attr_reader :http_version

    # The out-parameters of the calls that copy a response: taken from OUT_PARAMS and given back
    # by each copy (Array#pop and #push are atomic; two threads never share a set).
    OutParams = Struct.new(:summary, :name, :value, :metrics)
    OUT_PARAMS = []

    def self.out_params
      OUT_PARAMS.pop || begin
        summary = Native::Summary.new
        summary[:size] = Native::Summary.size # (the library writes the same size back)
        metrics = Native::Metrics.new
        metrics[:size] = Native::Metrics.size
        OutParams.new(summary, FFI::MemoryPointer.new(:pointer), FFI::MemoryPointer.new(:pointer), metrics)
      end
    end

    # Bodies larger than this (bytes) are copied with everything else at once (see the class).
    EAGER_BODY = 64 * 1024

    # Copies everything out of a borrowed rq_response pointer: the outcome, status, HTTP version,
    # attempts and body in one call (rq_response_get_summary), then the headers, URL, message and
    # metrics.
    def self.copy(pointer, request)
      out = out_params
      begin
        RequestQueue.check(Native.rq_response_get_summary(pointer, out.summary))
        copy_whole(pointer, out, request)
      ensure
        OUT_PARAMS.push(out)
      end
    end

    # The Response of a completion (an rq_summary_completion_fn: `pointer` arrives retained for us,
    # with its outcome, status, HTTP version and body as arguments: no call into the library); the
    # rest read when asked for (see the class). A body above EAGER_BODY bytes: everything copied
    # now and the response let go. `pointer` is released whatever happens.
    def self.completed(pointer, outcome, status, http_version, body_pointer, length, request)
      if length > EAGER_BODY
        begin
          return with_out_params do |out|
            RequestQueue.check(Native.rq_response_get_summary(pointer, out.summary))
            copy_whole(pointer, out, request)
          end
        ensure
          Native.rq_response_release(pointer)
        end
      end
      retained = FFI::AutoPointer.new(pointer, Reaper::RESPONSE_RELEASER)
      body = length.zero? ? String.new(encoding: Encoding::BINARY) : body_pointer.read_bytes(length)
      response = allocate
      response.__send__(:init_retained, retained, Native::OUTCOMES.fetch(outcome, :transport),
                        status, body.freeze, http_version, request)
      response
    end

    # A Response of everything in `pointer`, whose summary is in out.summary.
    def self.copy_whole(pointer, out, request)
      summary = out.summary
      length = summary[:body_size]
      body = length.zero? ? String.new(encoding: Encoding::BINARY) : summary[:body].read_bytes(length)
      outcome = Native::OUTCOMES.fetch(summary[:outcome], :transport)
      new(outcome: outcome,
          metrics: copy_metrics(pointer, out.metrics),
          status: summary[:status],
          body: body.freeze,
          headers: read_headers(pointer, out),
          url: read_url(pointer),
          error_message: outcome == :ok ? "" : read_error_message(pointer),
          attempts: summary[:attempts],
          http_version: summary[:http_version],
          request: request)
    end

    def self.read_headers(pointer, out)
      name_p = out.name
      value_p = out.value
      Array.new(Native.rq_response_header_count(pointer)) do |i|
        RequestQueue.check(Native.rq_response_header_at(pointer, i, name_p, value_p))
        [text(name_p.read_pointer.read_string), text(value_p.read_pointer.read_string)].freeze
      end.freeze
    end

    def self.read_url(pointer)
      text(Native.rq_response_url(pointer).to_s).freeze
    end

    def self.read_error_message(pointer)
      text(Native.rq_response_error_message(pointer).to_s).freeze
    end

    # How each field of a retained response is read when first asked for.
    LAZY = {
      header_pairs: ->(pointer) { with_out_params { |out| read_headers(pointer, out) } },
      url: ->(pointer) { read_url(pointer) },
      error_message: ->(pointer) { read_error_message(pointer) },
      metrics: ->(pointer) { with_out_params { |out| copy_metrics(pointer, out.metrics) } },
      attempts: ->(pointer) { Native.rq_response_attempts(pointer) },
    }.freeze
    private_constant :LAZY

    def self.with_out_params
      out = out_params
      begin
        yield out
      ensure
        OUT_PARAMS.push(out)
      end
    end

    def self.copy_metrics(pointer, raw)
      RequestQueue.check(Native.rq_response_metrics(pointer, raw))
      time = lambda do |name|
        value = raw[name]
        value.negative? ? nil : value
      end
      Metrics.new(queued: time[:queued], dns: time[:dns], connect: time[:connect], tls: time[:tls],
                  first_byte: time[:first_byte], total: time[:total],
                  bytes_down: raw[:bytes_down], bytes_up: raw[:bytes_up], attempts: raw[:attempts],
                  connection_reused: raw[:connection_reused] != 0,
                  wire_bytes_down: raw[:wire_bytes_down], header_bytes_down: raw[:header_bytes_down],
                  http_version: raw[:http_version]).freeze
    end

    # UTF-8 when the bytes are valid UTF-8, binary otherwise.
    def self.text(bytes)
      # (Re-labelled in place: the callers pass a string of their own, fresh from the library.)
      s = (bytes.frozen? ? bytes.dup : bytes).force_encoding(Encoding::UTF_8)
      s.valid_encoding? ? s : s.force_encoding(Encoding::BINARY)
    end

    def initialize(outcome:, status:, body:, headers:, url:, error_message:, attempts:, request: nil,
                   metrics: nil, http_version: 0)
      @outcome = outcome
      @status = status
      @body = body
      @header_pairs = headers
      @headers = Headers.from_pairs(headers)
      @url = url
      @error_message = error_message
      @attempts = attempts
      @request = request
      @metrics = metrics
      @http_version = http_version
      @retained = nil
      freeze
    end

    # Every header of the response, in the order received: [[name, value], ...].
    def header_pairs
      @header_pairs || lazy(:header_pairs)
    end

    # A Headers (case-insensitive Hash; repeated headers joined with ", ").
    def headers
      @headers || (@retained ? @lazy.fetch(:headers) { @lazy[:headers] = Headers.from_pairs(header_pairs) } : nil)
    end

    # The effective URL, after redirects.
    def url
      @url || lazy(:url)
    end

    # The library's message for an outcome other than :ok ("" for :ok).
    def error_message
      @error_message || lazy(:error_message)
    end

    # The number of attempts made (1 unless the request was retried).
    def attempts
      @attempts || lazy(:attempts)
    end

    # Timings and byte counts (a Metrics).
    def metrics
      @metrics || lazy(:metrics)
    end

    def ok?
      outcome == :ok
    end
    alias success? ok?
    alias code status

    # The body parsed as JSON (JSON.parse options may be given, such as symbolize_names: true).
    def json(**options)
      require "json"
      JSON.parse(body, **options)
    end

    # The charset of the Content-Type header ("utf-8", "ISO-8859-1", ...), or nil when it names none.
    def charset
      content_type = header("content-type")
      content_type && content_type[/;\s*charset\s*=\s*"?([^";\s]+)/i, 1]
    end

    # Names of charsets that servers send and Ruby's Encoding does not know by that name.
    CHARSET_ALIASES = { "latin-1" => Encoding::ISO_8859_1, "latin1" => Encoding::ISO_8859_1,
                        "l1" => Encoding::ISO_8859_1, "utf8" => Encoding::UTF_8 }.freeze
    private_constant :CHARSET_ALIASES

    # The body as text: decoded with the charset of Content-Type (UTF-8 when it names none, or one
    # Ruby does not know) into a UTF-8 String, each invalid byte replaced with U+FFFD. #body stays
    # the bytes as received (Encoding::BINARY).
    def text
      name = charset
      encoding = name && (CHARSET_ALIASES[name.downcase] || (Encoding.find(name) rescue nil))
      encoding = Encoding::UTF_8 if encoding.nil? || encoding.dummy?
      string = body.dup.force_encoding(encoding)
      if encoding == Encoding::UTF_8
        string.scrub
      else
        string.encode(Encoding::UTF_8, invalid: :replace, undef: :replace)
      end
    end

    def cancelled?
      outcome == :cancelled
    end

    def timed_out?
      outcome == :timeout
    end

    # The value of the first header named `name` (case-insensitive), or nil.
    def header(name)
      wanted = name.to_s.downcase
      pair = header_pairs.find { |n, _| n.downcase == wanted }
      pair && pair[1]
    end
    alias [] header

    # The headers as a Hash with lower-case names; repeated headers are joined with ", ".
    def header_hash
      headers.downcased
    end

    # nil when ok?, else an instance of the RequestError subclass for the outcome (for
    # :http_status an HTTPStatusError, which carries this response).
    def error
      return nil if ok?

      OUTCOME_ERRORS.fetch(outcome, TransportError).new(self)
    end

    # Raises #error unless ok?; returns self otherwise.
    def raise_error
      err = error
      raise err if err

      self
    end
    alias value! raise_error

    def inspect
      "#<#{self.class} #{outcome} status=#{status} body=#{body.bytesize}B url=#{url}>"
    end

    private

    def init_retained(retained, outcome, status, body, http_version, request)
      @retained = retained
      @lazy = {} # (the fields read so far; the Response itself is frozen)
      @outcome = outcome
      @status = status
      @body = body
      @http_version = http_version
      @request = request
      @error_message = "" if outcome == :ok
      freeze
    end

    def lazy(name)
      return nil unless @retained

      @lazy.fetch(name) { @lazy[name] = LAZY.fetch(name).call(@retained) }
    end
  end
end
