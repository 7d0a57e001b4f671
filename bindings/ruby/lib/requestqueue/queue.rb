# frozen_string_literal: true

require "forwardable"
require "monitor"

module RequestQueue
  # A queue of concurrent HTTP requests, run by librequestqueue on libcurl in the background.
  # Callbacks (completion, progress, authentication) run only when the host dispatches them, on
  # the Ruby thread that calls #run, #dispatch or #close: never on a thread of the library.
  #
  #   queue = RequestQueue::Queue.new(max_concurrent: 4)
  #   urls.each { |url| queue.add(url) { |response| puts "#{response.status} #{url}" } }
  #   queue.run        # dispatches callbacks until every request has completed
  #   queue.close
  #
  # Event loops: the queue's descriptor (#to_io) is readable exactly while callbacks are
  # pending, so `IO.select([queue, *sockets])` followed by `queue.dispatch` integrates it.
  #
  # Every method may be called from any Ruby thread and from inside the queue's own callbacks
  # (add, cancel, suspend, resume, limits), except #run, #dispatch and #close, which raise
  # WouldDeadlockError there.
  class Queue
    # What the finalizer, the reaper and the exit hook know of a queue: never the Queue, its State
    # or its requests, so that a queue nobody references (with its requests, which reference it)
    # is garbage.
    Handle = Struct.new(:address, :monitor, :closed, :suppressed) # :nodoc:

    # Bookkeeping shared with the callbacks (which reach it through a request in flight). It holds
    # the requests in flight (and so their blocks) but not the Queue nor its native handle.
    class State # :nodoc:
      attr_reader :handle, :errors, :outstanding, :idle_reader

      def initialize(address)
        @handle = Handle.new(address, Monitor.new, false, false)
        @errors = []
        @outstanding = {} # request key => Request, for every request accepted and not completed
        # A pipe that holds one byte exactly while nothing is outstanding, so that a thread
        # waiting in #run wakes up when another thread dispatched the last completion.
        @idle_reader, @idle_writer = IO.pipe
        @idle_lock = Mutex.new
        @idle_writer.write("i")
      end

      def add(key, request)
        @idle_lock.synchronize do
          @idle_reader.read(1) if @outstanding.empty? && !@idle_writer.closed?
          @outstanding[key] = request
        end
      end

      # Returns whether the request was outstanding.
      def remove(key)
        @idle_lock.synchronize do
          next false unless @outstanding.delete(key)

          @idle_writer.write("i") if @outstanding.empty? && !@idle_writer.closed?
          true
        end
      end

      extend Forwardable
      def_delegators :@handle, :address, :monitor, :closed, :closed=, :suppressed

      # After the native queue is freed (every completion delivered): nothing waits on it any more.
      def close_pipe
        @idle_lock.synchronize do
          @idle_writer.close
          @idle_reader.close
        end
      end
    end

    # Open queues of this process: native address => [Handle, pointer], closed at exit.
    OPEN = {}
    @exit_hook = false

    class << self
      # Creates a queue, yields it and closes it when the block returns or raises.
      def open(**options)
        queue = new(**options)
        return queue unless block_given?

        begin
          yield queue
        ensure
          queue.close
        end
      end

      # Frees the native queue of a Queue that was not closed: by the reaper for a queue the
      # garbage collector let go of (its finalizer only hands it over, see Reaper), and at exit.
      # It cancels the requests in flight; their blocks are not called (a dropped queue's
      # requests were collected with it; at exit there is no caller to give them to). In a forked
      # child, the library releases a queue of the parent at once (see "Fork" in requestqueue.h).
      def release(handle, pointer) # :nodoc:
        return if handle.closed

        handle.suppressed = true
        handle.closed = true
        OPEN.delete(handle.address)
        Native.rq_queue_free(pointer)
      end

      # Frees every queue of this process still open: requests in flight are cancelled and the
      # library's threads stop before the interpreter exits. Installed with at_exit when the
      # first queue is created (so that it runs after at_exit blocks registered earlier, such
      # as minitest's). The queues dropped so far are freed first (the reaper stops). A queue
      # that another thread is dispatching right now is left alone.
      def close_all_at_exit # :nodoc:
        Reaper.stop
        OPEN.values.each do |handle, pointer|
          next unless handle.monitor.try_enter

          begin
            release(handle, pointer)
          ensure
            handle.monitor.exit
          end
        end
      end

      def track(state) # :nodoc:
        OPEN[state.address] = [state.handle, FFI::Pointer.new(state.address)]
        return if @exit_hook # (a forked child inherits the hook)

        @exit_hook = true
        at_exit { Queue.close_all_at_exit }
      end
    end

    # Counters since the queue was created (rq_queue_stats).
    Stats = Struct.new(:added, :started, :retried, :succeeded, :cancelled, :failed, :coalesced,
                       :bytes_down, :bytes_up, keyword_init: true)

    # max_concurrent: how many requests run at once (0 = unlimited).
    # mode: :fifo (default) or :lifo, the order in which waiting requests start.
    # duplicates: :cancel_earlier (default: adding a request equal to a waiting or running one,
    #   same method, URL, headers and body, cancels the earlier one), :allow, or :coalesce (an
    #   equal GET/HEAD/OPTIONS joins the transfer already waiting or running; each gets the result).
    # max_per_host: how many run at once to one origin (scheme, host, port; 0 = no such limit).
    # rate_limit: [starts, seconds] or { starts:, per:, per_host: }; see #rate_limit.
    def initialize(max_concurrent: 2, mode: :fifo, duplicates: :cancel_earlier, max_per_host: 0,
                   rate_limit: nil, defaults: nil, max_connections: 0, max_host_connections: 0)
      check_max_concurrent(max_concurrent) # bad arguments raise before anything is created
      check_max_concurrent(max_per_host, "max_per_host")
      symbol_index(Native::ORDERS, mode, "mode")
      symbol_index(Native::DUPLICATES, duplicates, "duplicates")
      rate = rate_limit_arguments(rate_limit)
      out = FFI::MemoryPointer.new(:pointer)
      RequestQueue.check(Native.rq_queue_new(Native::DELIVERY_DISPATCH, out), "creating a queue")
      raw = out.read_pointer
      Reaper.start
      @state = State.new(raw.address)
      @pointer = FFI::AutoPointer.new(raw, Reaper.queue_releaser(@state.handle))
      Queue.track(@state)
      fd = FFI::MemoryPointer.new(:int)
      RequestQueue.check(Native.rq_queue_get_fd(@pointer, fd))
      # The descriptor belongs to the library: never closed by Ruby (autoclose: false).
      @io = IO.for_fd(fd.read(:int), autoclose: false)
      self.max_concurrent = max_concurrent
      self.mode = mode
      self.duplicates = duplicates
      self.max_per_host = max_per_host unless max_per_host.zero?
      rate_limit(*rate[0], **rate[1]) if rate
      self.defaults = defaults if defaults
      set_max_connections(max_connections, max_host_connections) unless max_connections.zero? && max_host_connections.zero?
    end

    # ---- Transport defaults, connection limits, cookies ----------------------------------

    # Sets the queue's defaults: Request options (headers:, timeouts, credentials:, retry:,
    # max_redirects:, max_response_size:, ca_file: and the transport options) that every request
    # added afterwards takes unless it sets them itself (its own value wins; headers merge by
    # name). Changes add to the defaults already set.
    def defaults=(options)
      out = FFI::MemoryPointer.new(:pointer)
      RequestQueue.check(Native.rq_queue_get_defaults(native, out), "defaults")
      Transport.apply_defaults(out.read_pointer, options)
    end

    # libcurl's connection limits (0 = none), beside the request limits: at most `total`
    # connections open at once and `per_host` to one host.
    def set_max_connections(total, per_host = 0)
      [total, per_host].each do |n|
        raise ArgumentError, "connection limits must be Integers from 0 to 100000, not #{n.inspect}" unless n.is_a?(Integer) && n.between?(0, 100_000)
      end
      RequestQueue.check(Native.rq_queue_set_max_connections(native, total, per_host), "max_connections")
    end

    # [total, per_host] as set with set_max_connections.
    def max_connections
      total = FFI::MemoryPointer.new(:size_t)
      per_host = FFI::MemoryPointer.new(:size_t)
      RequestQueue.check(Native.rq_queue_get_max_connections(native, total, per_host))
      [total.read(:size_t), per_host.read(:size_t)]
    end

    # The cookies of the queue's jar (requests made with cookies: true), as Transport::Cookie.
    def cookies
      out = FFI::MemoryPointer.new(:pointer)
      RequestQueue.check(Native.rq_queue_cookies_list(native, out), "cookies")
      text = out.read_pointer
      begin
        Transport.parse_cookies(text.read_string)
      ensure
        Native.rq_string_free(text)
      end
    end

    def clear_cookies
      RequestQueue.check(Native.rq_queue_cookies_clear(native), "clear_cookies")
    end

    # Adds the cookies of a Netscape cookie file (as curl -c writes); SystemCallError
    # (Errno::ENOENT ...) when it cannot be read.
    def load_cookies(path)
      path = path.to_path if path.respond_to?(:to_path)
      return if Native.rq_queue_cookies_load(native, path.to_s) == RQ_OK_CODE

      File.open(path.to_s, "r").close # raises the system's error
      raise IOError, "cannot read the cookie file #{path}"
    end

    # Writes every cookie to a Netscape cookie file (replacing it).
    def save_cookies(path)
      path = path.to_path if path.respond_to?(:to_path)
      return if Native.rq_queue_cookies_save(native, path.to_s) == RQ_OK_CODE

      raise IOError, "cannot write the cookie file #{path}"
    end
    RQ_OK_CODE = 0
    private_constant :RQ_OK_CODE

    # ---- Settings -----------------------------------------------------------------------

    def max_concurrent
      out = FFI::MemoryPointer.new(:size_t)
      RequestQueue.check(Native.rq_queue_get_max_concurrent(native, out))
      out.read(:size_t)
    end

    # Takes effect at once: raising it starts waiting requests, lowering it interrupts nothing.
    def max_concurrent=(count)
      check_max_concurrent(count)
      RequestQueue.check(Native.rq_queue_set_max_concurrent(native, count), "max_concurrent #{count}")
    end

    # :fifo or :lifo.
    def mode
      out = FFI::MemoryPointer.new(:int)
      RequestQueue.check(Native.rq_queue_get_order(native, out))
      Native::ORDERS.fetch(out.read(:int))
    end

    # Applies to requests added from now on.
    def mode=(mode)
      RequestQueue.check(Native.rq_queue_set_order(native, symbol_index(Native::ORDERS, mode, "mode")))
    end

    # :cancel_earlier or :allow.
    def duplicates
      out = FFI::MemoryPointer.new(:int)
      RequestQueue.check(Native.rq_queue_get_duplicates(native, out))
      Native::DUPLICATES.fetch(out.read(:int))
    end

    def duplicates=(value)
      RequestQueue.check(Native.rq_queue_set_duplicates(native, symbol_index(Native::DUPLICATES, value, "duplicates")))
    end

    def max_per_host
      out = FFI::MemoryPointer.new(:size_t)
      RequestQueue.check(Native.rq_queue_get_max_per_host(native, out))
      out.read(:size_t)
    end

    # A waiting request whose origin is at this limit keeps its place while others start.
    def max_per_host=(count)
      check_max_concurrent(count, "max_per_host")
      RequestQueue.check(Native.rq_queue_set_max_per_host(native, count), "max_per_host #{count}")
    end

    # At most `starts` request starts per `per` seconds (a token bucket), for the whole queue or,
    # with per_host: true, for each origin. Retries do not count. `rate_limit(0)` or
    # `rate_limit(nil)` removes the limit. Returns self.
    def rate_limit(starts, per: 1.0, per_host: false)
      starts ||= 0
      unless starts.is_a?(Integer) && starts >= 0 && starts <= 0xFFFF_FFFF
        raise ArgumentError, "rate_limit starts must be an Integer >= 0 (0 = no limit), not #{starts.inspect}"
      end
      raise TypeError, "rate_limit per: must be a number of seconds, not #{per.class}" unless per.is_a?(Numeric)

      RequestQueue.check(Native.rq_queue_set_rate_limit(native, starts, per.to_f, per_host ? 1 : 0),
                         "rate_limit #{starts} per #{per}")
      self
    end

    # The queue's counters (a Stats): added, started, retried, succeeded, cancelled, failed,
    # coalesced, bytes_down, bytes_up.
    def stats
      raw = Native::QueueStats.new
      raw[:size] = Native::QueueStats.size
      RequestQueue.check(Native.rq_queue_get_stats(native, raw))
      Stats.new(**Stats.members.to_h { |name| [name, raw[name]] }).freeze
    end

    # ---- Requests -------------------------------------------------------------------------

    # Adds a request and returns it (a Request). `target` is a URL (String or URI) with the
    # options of Request.new, or a Request built beforehand (then no options). The block, if
    # given, is the completion: it receives the Response once, whatever the outcome.
    def add(target, **options, &on_complete)
      # A URL alone (the common request): made, completed and added in one library call.
      return Request.add_url(target, on_complete, self, @state, @pointer) if options.empty? && PLAIN_URL[target.class]

      request =
        if target.is_a?(Request)
          raise ArgumentError, "options belong to Request.new when adding a Request" unless options.empty?
          raise AlreadyAddedError, "this request was already added to a queue" if target.queue

          target.on_complete(&on_complete) if on_complete
          target
        else
          Request.new(target, **options, &on_complete)
        end
      request.submit(self, @state, native)
    end

    # The classes of a target that Request.add_url takes as it is (Request.new would take it too).
    PLAIN_URL = { String => true }.freeze
    private_constant :PLAIN_URL

    # Adds a Request built beforehand; returns the queue.
    def <<(request)
      raise TypeError, "expected a RequestQueue::Request, got #{request.class}" unless request.is_a?(Request)

      add(request)
      self
    end

    # Cancels one request of this queue; see Request#cancel.
    def cancel(request)
      raise TypeError, "expected a RequestQueue::Request, got #{request.class}" unless request.is_a?(Request)

      request.cancel
    end

    # Cancels every waiting and running request; their completions say :cancelled.
    def cancel_all
      RequestQueue.check(Native.rq_queue_cancel_all(native))
      self
    end

    # Cancels the waiting and running requests with this tag; returns how many.
    def cancel_tag(tag)
      out = FFI::MemoryPointer.new(:size_t)
      RequestQueue.check(Native.rq_queue_cancel_tag(native, check_tag(tag), out))
      out.read(:size_t)
    end

    # No waiting request starts until #resume; running ones go on.
    def suspend
      RequestQueue.check(Native.rq_queue_suspend(native))
      self
    end

    def resume
      RequestQueue.check(Native.rq_queue_resume(native))
      self
    end

    def suspended?
      out = FFI::MemoryPointer.new(:int)
      RequestQueue.check(Native.rq_queue_is_suspended(native, out))
      out.read(:int) != 0
    end

    # Requests running plus waiting (with this tag, if given). A request leaves the count just
    # before its completion.
    def count(tag: nil)
      out = FFI::MemoryPointer.new(:size_t)
      if tag.nil?
        RequestQueue.check(Native.rq_queue_count(native, out))
      else
        RequestQueue.check(Native.rq_queue_count_tag(native, check_tag(tag), out))
      end
      out.read(:size_t)
    end
    alias size count
    alias length count

    # True when every request added has completed and its completion has been dispatched.
    def idle?
      @state.outstanding.empty?
    end

    # The requests of the queue (with this tag, if given) at one instant: running ones in the
    # order they started, then waiting ones in the order they will start.
    def requests(tag: nil)
      array = FFI::MemoryPointer.new(:pointer)
      length = FFI::MemoryPointer.new(:size_t)
      if tag.nil?
        RequestQueue.check(Native.rq_queue_snapshot(native, array, length))
      else
        RequestQueue.check(Native.rq_queue_snapshot_tag(native, check_tag(tag), array, length))
      end
      handles = array.read_pointer
      begin
        n = length.read(:size_t)
        pointers = n.zero? ? [] : handles.read_array_of_pointer(n)
        by_handle = @state.outstanding.each_value.to_h { |request| [request.handle_address, request] }
        pointers.filter_map { |pointer| by_handle[pointer.address] }
      ensure
        Native.rq_snapshot_free(handles)
      end
    end

    # ---- Running callbacks ---------------------------------------------------------------

    # Runs the callbacks that are pending now, on this thread, without waiting; at most `max`
    # of them (0 = all). Returns how many ran. Raises the first exception a block raised.
    def dispatch(max = 0)
      unless max.is_a?(Integer) && max >= 0
        raise ArgumentError, "max must be an Integer >= 0 (0 = all pending), not #{max.inspect}"
      end

      ran = FFI::MemoryPointer.new(:size_t)
      @state.monitor.synchronize do
        RequestQueue.check(Native.rq_queue_dispatch(native, max, ran))
      end
      raise_callback_error
      ran.read(:size_t)
    end

    # Dispatches callbacks on this thread until every request added has completed (including
    # requests added by the callbacks themselves), waiting on the queue's descriptor in between.
    # With a timeout (seconds), returns false if requests are still outstanding then; true once
    # idle. A suspended queue with waiting requests is not idle: run waits for #resume (from a
    # callback or another thread) or for the timeout. Interruptible: Ctrl-C (Interrupt), SIGTERM
    # and Thread#raise stop it at once; the requests go on, and a later run continues.
    # An exception raised by a block stops the run and is raised here.
    def run(timeout: nil)
      unless timeout.nil? || (timeout.is_a?(Numeric) && timeout >= 0)
        raise ArgumentError, "timeout must be nil or a number of seconds >= 0, not #{timeout.inspect}"
      end

      deadline = timeout && (clock + timeout)
      loop do
        # A queue closed (here or by another thread) has delivered every completion.
        return idle? if @state.closed

        begin
          dispatch
        rescue QueueClosedError
          raise unless @state.closed # closed by another thread: the next turn returns

          next
        end
        return true if idle?

        wait = nil
        if deadline
          wait = deadline - clock
          return false if wait <= 0
        end
        begin
          if Queue.fiber_scheduler?
            # Under a Fiber scheduler (the async gem): the scheduler waits, other fibers run. It
            # waits for one IO, so the idle pipe (another fiber or thread ran the last completion)
            # is checked every FIBER_IDLE_CHECK seconds.
            wait_readable(wait.nil? ? FIBER_IDLE_CHECK : [wait, FIBER_IDLE_CHECK].min)
          else
            IO.select([to_io, @state.idle_reader], nil, nil, wait)
          end
        rescue IOError, Errno::EBADF, QueueClosedError
          raise unless @state.closed # closed by another thread while waiting
        end
      end
    end

    # How often #run under a Fiber scheduler looks whether another fiber or thread made the queue
    # idle (seconds).
    FIBER_IDLE_CHECK = 0.05

    # True when this fiber runs under a non-blocking Fiber scheduler (Ruby >= 3.0, e.g. async).
    def self.fiber_scheduler?
      Fiber.respond_to?(:scheduler) && !Fiber.scheduler.nil? && !Fiber.blocking?
    end

    # Waits until callbacks are pending (the descriptor is readable) or `timeout` seconds have
    # passed (nil: no limit); returns true when readable. Under a Fiber scheduler the other fibers
    # run meanwhile; as a scheduler takes one waiter per IO, one fiber of a thread waits on the
    # descriptor and the others of that thread sleep for at most FIBER_IDLE_CHECK seconds at a time.
    def wait_readable(timeout = nil)
      io = to_io
      return !IO.select([io], nil, nil, timeout).nil? unless Queue.fiber_scheduler?

      waiting = (@fiber_waiting ||= {})
      thread = Thread.current
      if waiting[thread]
        sleep(timeout.nil? ? FIBER_IDLE_CHECK : [timeout, FIBER_IDLE_CHECK].min)
        return false
      end
      waiting[thread] = true
      begin
        !io.wait_readable(timeout).nil?
      ensure
        waiting.delete(thread)
      end
    end

    # The queue's descriptor as an IO (readable exactly while callbacks are pending), for
    # IO.select and event loops. Never read, write or close it; it is invalid after #close.
    def to_io
      native
      @io
    end

    def fileno
      to_io.fileno
    end

    # ---- Closing ----------------------------------------------------------------------------

    # Frees the queue: cancels every waiting and running request and delivers their completions
    # (:cancelled) on this thread before returning. Closing twice is a no-op. Raises the first
    # exception a block raised.
    def close
      return nil if @state.closed

      @state.monitor.synchronize do
        return nil if @state.closed

        rc = Native.rq_queue_free(@pointer)
        RequestQueue.check(rc, "closing the queue") if rc == WouldDeadlockError::CODE
        @state.closed = true
        @pointer.autorelease = false
        OPEN.delete(@state.address)
        @io = nil
        @state.close_pipe
        RequestQueue.check(rc, "closing the queue")
      end
      raise_callback_error
      nil
    end

    def closed?
      @state.closed
    end

    def inspect
      return "#<#{self.class} closed>" if closed?

      "#<#{self.class} count=#{count} max_concurrent=#{max_concurrent} #{mode}#{" suspended" if suspended?}>"
    end

    private

    def native
      raise QueueClosedError, "the queue is closed" if @state.closed

      @pointer
    end

    def raise_callback_error
      error = @state.errors.shift
      raise error if error
    end

    def check_max_concurrent(count, what = "max_concurrent")
      return if count.is_a?(Integer) && count >= 0 && count < 2**63

      raise ArgumentError, "#{what} must be an Integer >= 0 (0 = unlimited), not #{count.inspect}"
    end

    def check_tag(tag)
      raise TypeError, "tag must be a String, not #{tag.class}" unless tag.is_a?(String)

      tag
    end

    # [[starts], {per:, per_host:}] from the rate_limit: option of #initialize, or nil.
    def rate_limit_arguments(value)
      case value
      when nil then nil
      when Array
        raise ArgumentError, "rate_limit: [starts, seconds]" unless value.size == 2

        [[value[0]], { per: value[1] }]
      when Hash
        unknown = value.keys - %i[starts per per_host]
        raise ArgumentError, "unknown rate_limit option#{"s" if unknown.size > 1}: #{unknown.join(", ")}" unless unknown.empty?

        [[value[:starts]], value.slice(:per, :per_host)]
      else
        raise TypeError, "rate_limit must be [starts, seconds] or a Hash, not #{value.class}"
      end
    end

    def symbol_index(list, value, what)
      list.index(value) or raise ArgumentError, "#{what} must be one of #{list.map(&:inspect).join(", ")}, not #{value.inspect}"
    end

    def clock
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
