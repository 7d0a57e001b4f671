# frozen_string_literal: true

module RequestQueue
  # Base class of every error this gem raises (except LibraryNotFound, a LoadError).
  class Error < StandardError; end

  # ---- Errors of API calls, mapped from rq_result codes ---------------------------------------

  # A call into the library failed. #code is the rq_result value, #result_name its symbol.
  class CallError < Error
    CODE = -1
    attr_reader :code

    def initialize(message = nil, code: self.class::CODE)
      @code = code
      super(message || Native.rq_result_str(code))
    end

    def result_name
      Native::RESULT_NAMES[code] || :unknown
    end
  end

  # rq_result code => exception class. Every code of the header has its own class.
  RESULT_ERRORS = {}

  {
    1 => :NullArgumentError,
    2 => :InvalidHandleError,
    3 => :InvalidArgumentError,
    4 => :InvalidURLError,
    5 => :UnsupportedSchemeError,
    6 => :InvalidMethodError,
    7 => :InvalidHeaderError,
    8 => :AlreadyAddedError,
    9 => :RequestFrozenError,
    10 => :NotActiveError,
    11 => :InvalidStateError,
    12 => :WrongDeliveryError,
    13 => :QueueClosedError,
    14 => :TimedOutError,
    15 => :WouldDeadlockError,
    16 => :OutOfMemoryError,
    17 => :SystemError,
  }.each do |code, name|
    # InvalidURLError and UnsupportedSchemeError are kinds of invalid argument, as are bad
    # methods and headers: `rescue RequestQueue::InvalidArgumentError` catches all bad input.
    parent = [4, 5, 6, 7].include?(code) ? RESULT_ERRORS.fetch(3) : CallError
    klass = Class.new(parent)
    klass.const_set(:CODE, code)
    const_set(name, klass)
    RESULT_ERRORS[code] = klass
  end
  RESULT_ERRORS.freeze

  # Raises the exception class mapped from `code` unless it is RQ_OK: "<what>: <name of the code>:
  # <the library's reason>". Call it right after the library call that returned `code`, on the same
  # thread: the reason is the library's (rq_last_error_message), without its function name.
  def self.check(code, what = nil)
    return code if code == Native::RQ_OK

    klass = RESULT_ERRORS.fetch(code, CallError)
    text = Native.rq_result_str(code)
    reason = last_error_reason
    text = "#{text}: #{reason}" unless reason.empty?
    raise klass.new(what ? "#{what}: #{text}" : text, code: code)
  end

  # Why the library's last failed call on this thread failed, without the function's name.
  def self.last_error_reason
    message = Native.rq_last_error_message.to_s
    name, reason = message.split(": ", 2)
    reason && name.start_with?("rq_") ? reason : message
  end

  # ---- Errors of requests, mapped from rq_outcome values ---------------------------------------

  # A request did not succeed. #response is the whole Response (status, headers, body, message,
  # attempts), #request the Request. Get one with Response#error, or raise it with
  # Response#raise_error / Response#value!.
  class RequestError < Error
    attr_reader :response

    def initialize(response)
      @response = response
      super(response.error_message.empty? ? response.outcome.to_s : response.error_message)
    end

    def request
      response.request
    end

    def outcome
      response.outcome
    end
  end

  # The server answered with a status >= 400; the response (status, headers, body) is attached.
  class HTTPStatusError < RequestError
    def status
      response.status
    end
  end

  # Outcome symbol => exception class.
  OUTCOME_ERRORS = {}

  {
    cancelled: :CancelledError,
    http_status: :HTTPStatusError,
    timeout: :TimeoutError,
    cannot_resolve_host: :CannotResolveHostError,
    cannot_connect: :CannotConnectError,
    connection_lost: :ConnectionLostError,
    tls: :TLSError,
    too_many_redirects: :TooManyRedirectsError,
    bad_response: :BadResponseError,
    bad_redirect: :BadRedirectError,
    transport: :TransportError,
    response_too_large: :ResponseTooLargeError,
    file_error: :FileError,
  }.each do |outcome, name|
    klass = const_defined?(name, false) ? const_get(name) : const_set(name, Class.new(RequestError))
    OUTCOME_ERRORS[outcome] = klass
  end
  OUTCOME_ERRORS.freeze
end
