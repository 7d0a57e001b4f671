# frozen_string_literal: true

module RequestQueue
  # An authentication challenge (the server answered 401), given to a request's on_auth block.
  # Answer it exactly once, during the block or later (from any thread), with #use_credential,
  # #continue_without or #cancel. Until then the request keeps its running slot.
  class AuthChallenge
    # Earlier credentials the server rejected for this request (0 the first time).
    attr_reader :failure_count
    # The 401 Response (status, headers such as WWW-Authenticate, body), copied.
    attr_reader :response
    attr_reader :request

    def initialize(pointer, failure_count, response, request)
      @pointer = pointer
      @failure_count = failure_count
      @response = response
      @request = request
      @answered = false
    end

    # Sends the request again with these credentials (Basic or Digest, as the server asks).
    def use_credential(user, password)
      answer { Native.rq_auth_use_credential(@pointer, String(user), String(password)) }
    end

    # Completes the request with the 401 response (an HTTPStatusError).
    def continue_without
      answer { Native.rq_auth_continue_without(@pointer) }
    end

    # Cancels the request (a CancelledError).
    def cancel
      answer { Native.rq_auth_cancel(@pointer) }
    end

    def answered?
      @answered
    end

    # The realm of a Basic/Digest WWW-Authenticate header, or nil.
    def realm
      value = response["www-authenticate"]
      value && value[/realm="([^"]*)"/, 1]
    end

    private

    def answer
      raise InvalidStateError, "this challenge was already answered" if @answered

      RequestQueue.check(yield, "answering the authentication challenge")
      @answered = true
      nil
    end
  end

  # The C callbacks. There is one FFI::Function of each kind for the whole process (never
  # garbage collected); each finds its request in REGISTRY by its key, the context the request's
  # completion was given (rq_request_set_summary_completion or rq_add_url_with_summary): the
  # Request's object_id, an Integer known before the request is added (a request added by
  # rq_add_url_with_summary may complete on another thread before its handle is known) and never reused while the Request lives. Its queue's
  # State is found through the Request. A request's Ruby blocks stay referenced by its queue
  # (State#outstanding) until its completion, its final callback.
  #
  # With the dispatch delivery every callback runs on the Ruby thread that called Queue#run,
  # #dispatch or #close. An exception raised by a block is caught here (it must not unwind
  # through the library's frames) and stored on the queue; the dispatching call raises it once
  # the library has returned.
  module Callbacks
    # request key => Request, held weakly: nothing global holds a request in flight (its queue
    # does, and it holds its queue), so a queue nobody references, with its requests, is garbage
    # (see Reaper). Ruby 3.1's WeakMap has no delete: an entry goes with its Request.
    REGISTRY = ObjectSpace::WeakMap.new

    def self.register(request, state)
      REGISTRY[request.key] = request
      state.add(request.key, request)
    end

    def self.unregister(request, state)
      state.remove(request.key)
    end

    # [Request, Queue::State] of a request in flight; nil for one collected with its queue.
    def self.lookup(key)
      request = REGISTRY[key]
      state = request&.queue_state
      [request, state] if state
    end

    # request key => the frozen String body of a request in flight (added, completion not yet
    # run), which the library reads in place (rq_request_set_body_borrowed, see Request#set_body).
    # Held here because a queue dropped with its requests is collected with them while the library
    # still runs them, until the reaper frees it. Emptied by each completion.
    HELD_BODIES = {}

    # The completion of every request (an rq_summary_completion_fn): `response_pointer` arrives
    # retained, with its outcome, status, HTTP version and body (Response.completed keeps it or
    # releases it). `handle`: the request's native handle (an Integer), for a Request whose add
    # has not yet returned it (see Request#handle_seen).
    def self.completion(key, handle, response_pointer, outcome, status, http_version, body, size)
      _held = HELD_BODIES.delete(key) unless HELD_BODIES.empty? # (let go of once this returns)
      request, state = lookup(key)
      unless request && state.remove(key)
        Native.rq_response_release(response_pointer) # (nobody is left to read it)
        return
      end

      request.handle_seen(handle)
      response = Response.completed(response_pointer, outcome, status, http_version, body, size, request)
      block = request.finish(response)
      block.call(response) if block && !state.suppressed
    rescue Exception => e # rubocop:disable Lint/RescueException -- must not unwind through C
      state&.errors&.push(e)
    end

    def self.progress(key, name, fraction, done, total)
      request, state = lookup(key)
      return unless request && !state.suppressed

      block = request.callback(name)
      block&.call(fraction.negative? ? nil : fraction, done, total.negative? ? nil : total)
    rescue Exception => e # rubocop:disable Lint/RescueException
      state&.errors&.push(e)
    end

    # Returns 0 to go on, 1 to cancel the request (the block raised).
    def self.body(key, data, size, offset)
      request, state = lookup(key)
      return 0 unless request && !state.suppressed

      block = request.callback(:on_body)
      block&.call(data.read_bytes(size), offset)
      0
    rescue Exception => e # rubocop:disable Lint/RescueException
      state&.errors&.push(e)
      1
    end

    def self.head(key, response_pointer)
      request, state = lookup(key)
      return unless request && !state.suppressed

      request.callback(:on_head)&.call(Response.copy(response_pointer, request))
    rescue Exception => e # rubocop:disable Lint/RescueException
      state&.errors&.push(e)
      begin
        request&.cancel # as for on_body: the request stops
      rescue StandardError
        nil # (already completed, or its queue is gone)
      end
    end

    def self.auth(key, challenge_pointer, failure_count, response_pointer)
      request, state = lookup(key)
      block = request&.callback(:on_auth)
      if block.nil? || state.suppressed
        # No handler (or the queue was dropped, or is being freed at exit): answer now so the
        # request does not wait forever.
        Native.rq_auth_cancel(challenge_pointer)
        return
      end
      challenge = AuthChallenge.new(challenge_pointer, failure_count,
                                    Response.copy(response_pointer, request), request)
      block.call(challenge)
    rescue Exception => e # rubocop:disable Lint/RescueException
      Native.rq_auth_cancel(challenge_pointer) if challenge.nil? || !challenge.answered?
      state&.errors&.push(e)
    end

    # The context (the request's key) and the request's handle come as Integers (no FFI::Pointer
    # made per call); the handle is unused but by the completion (see Request#handle_seen).
    COMPLETION = FFI::Function.new(:void, %i[ulong ulong pointer int int int pointer size_t]) \
      do |key, handle, response, outcome, status, http_version, body, size|
        completion(key, handle, response, outcome, status, http_version, body, size)
      end

    DOWNLOAD_PROGRESS = FFI::Function.new(:void, %i[ulong ulong double int64 int64]) do |key, _r, fraction, done, total|
      progress(key, :on_download_progress, fraction, done, total)
    end

    UPLOAD_PROGRESS = FFI::Function.new(:void, %i[ulong ulong double int64 int64]) do |key, _r, fraction, done, total|
      progress(key, :on_upload_progress, fraction, done, total)
    end

    BODY = FFI::Function.new(:int, %i[ulong ulong pointer size_t uint64]) do |key, _r, data, size, offset|
      body(key, data, size, offset)
    end

    HEAD = FFI::Function.new(:void, %i[ulong ulong pointer]) do |key, _r, response|
      head(key, response)
    end

    AUTH = FFI::Function.new(:void, %i[ulong ulong pointer uint pointer]) do |key, _r, challenge, failures, response|
      auth(key, challenge, failures, response)
    end
  end
end
