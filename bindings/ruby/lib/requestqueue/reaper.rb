# frozen_string_literal: true

module RequestQueue
  # Releases what the garbage collector lets go of: native request handles and queues nobody
  # closed.
  #
  # Finalizers (ObjectSpace.define_finalizer, FFI::AutoPointer releasers) run wherever Ruby
  # collects, in a restricted context: Mutex#lock raises there ("can't be called from trap
  # context"), and the interrupted thread may be anywhere. So the gem's finalizers never call the
  # library nor take a lock: they only push onto INBOX (Thread::Queue#push is allowed there). A
  # thread of the gem, started with the first queue, takes each item and releases it: it frees a
  # request handle, or frees a dropped queue with rq_queue_free (its requests still in flight are
  # cancelled; their blocks are not called: they were collected with the queue), or releases a
  # retained response (Response). The request handles and the responses waiting in INBOX when the
  # thread wakes go out in one call of each kind (rq_request_free_many, rq_response_release_many),
  # up to BATCH at a time. At exit, Queue.close_all_at_exit stops the thread and releases what is left
  # itself.
  module Reaper
    # [:request, pointer], [:response, pointer], [:queue, pointer, Queue::Handle], a Thread::Queue to answer once
    # everything before it is done (Reaper.wait), or :stop.
    INBOX = Thread::Queue.new
    START = Mutex.new
    # The most handles freed or released in one call.
    BATCH = 512
    @thread = nil

    # The finalizer of every request's handle (one for the process: it holds no reference to a
    # Request).
    REQUEST_RELEASER = proc { |pointer| INBOX.push([:request, pointer]) }
    # The finalizer of every retained response.
    RESPONSE_RELEASER = proc { |pointer| INBOX.push([:response, pointer]) }

    class << self

      # The finalizer of a queue's native handle (holds no reference to the Queue nor its State).
      def queue_releaser(handle)
        proc { |pointer| INBOX.push([:queue, pointer, handle]) }
      end

      # Starts the thread if it is not running in this process (never from a finalizer).
      def start
        return if @thread&.alive? && @pid == Process.pid

        START.synchronize do
          next if @thread&.alive? && @pid == Process.pid

          @pid = Process.pid
          @thread = Thread.new { run }
          @thread.name = "requestqueue-reaper" if @thread.respond_to?(:name=)
        end
      end

      # Returns once everything queued so far is released (for tests).
      def wait
        return unless @thread&.alive? && @pid == Process.pid

        done = Thread::Queue.new
        INBOX.push(done)
        done.pop
        nil
      end

      # Stops the thread (after what is queued), then releases what is queued meanwhile.
      def stop
        if @thread&.alive? && @pid == Process.pid
          INBOX.push(:stop)
          @thread.join
        end
        @thread = nil
        release(INBOX.pop(true)) until INBOX.empty?
      rescue ThreadError # emptied meanwhile
        nil
      end

      private

      def run
        batch = FFI::MemoryPointer.new(:pointer, BATCH)
        held = { request: [], response: [] }
        loop do
          item = INBOX.pop
          # What else is waiting, in order: the handles go out together, before anything after them.
          loop do
            list = item.is_a?(Array) && held[item[0]]
            if list
              list << item[1]
              release_many(item[0], list, batch) if list.size == BATCH
            else
              held.each { |kind, pointers| release_many(kind, pointers, batch) }
              return if item == :stop

              guarded(item) { release(item) }
            end
            break if INBOX.empty?

            item = INBOX.pop
          end
          held.each { |kind, pointers| release_many(kind, pointers, batch) }
        end
      end

      # Frees the request handles or releases the responses collected (and empties the list).
      def release_many(kind, pointers, batch)
        return if pointers.empty?

        guarded(pointers) do
          batch.put_array_of_pointer(0, pointers)
          if kind == :request
            Native.rq_request_free_many(batch, pointers.size)
          else
            Native.rq_response_release_many(batch, pointers.size)
          end
        end
        pointers.clear
      end

      def guarded(what)
        yield
      rescue Exception => e # rubocop:disable Lint/RescueException -- the thread must go on
        warn "requestqueue: releasing #{what.inspect} failed: #{e.class}: #{e.message}"
      end

      def release(item)
        kind, pointer, owner = item
        case kind
        when :request then Native.rq_request_free(pointer)
        when :response then Native.rq_response_release(pointer)
        when :queue then Queue.release(owner, pointer)
        when Thread::Queue then kind.push(true)
        end
      end
    end
  end
end
