# frozen_string_literal: true

require_relative "test_helper"

# What one request costs the gem, counted (not timed): the calls it makes into the library. Each
# call through ruby-ffi costs about 3,000 instructions, a large part of the gem's cost per request
# (issue 16). The counting cases run in a child Ruby, where every call of RequestQueue::Native is
# counted by name (and the items of the *_many calls by their count argument).
class TestCost < Minitest::Test
  COUNT = <<~'RUBY'
    CALLS = Hash.new(0)
    ITEMS = Hash.new(0)
    module CountCalls
      RequestQueue::Native.singleton_methods.grep(/\Arq_/).each do |name|
        define_method(name) do |*args|
          CALLS[name] += 1
          ITEMS[name] += args[1] if name.end_with?("_many")
          super(*args)
        end
      end
    end
    RequestQueue::Native.singleton_class.prepend(CountCalls)
    def url(path) = "http://127.0.0.1:#{PORT}#{path}"
    # The calls that are not about the queue as a whole (making it, dispatching, freeing it).
    def per_request = CALLS.reject { |name, _| name.start_with?("rq_queue_") }.sort.to_h
    def collect
      4.times { GC.start(full_mark: true, immediate_sweep: true) }
      RequestQueue::Reaper.wait
    end
  RUBY

  N = 50

  def counted(code)
    status, out, err = run_child(COUNT + code, limit: 120)
    assert status.success?, "exit status #{status.inspect}, stderr: #{err}"
    assert_equal "", err
    out.lines.map(&:chomp)
  end

  # A request added by URL, completed, read (status, outcome, body) and dropped: made, given its
  # completion and added in one call; its response arrives retained, with its summary as the
  # completion's arguments (rq_add_url_with_summary: no call to read it); both released
  # by the reaper once dropped, with the others dropped meanwhile (one call of each kind per batch).
  def test_library_calls_per_request
    out = counted(<<~RUBY)
      seen = []
      def add_all(queue, seen)
        #{N}.times { queue.add(url("/bytes?n=10")) { |r| seen << [r.status, r.outcome, r.body.bytesize] } }
        nil
      end
      queue = RequestQueue::Queue.new(max_concurrent: 8, duplicates: :allow)
      add_all(queue, seen)
      queue.run
      queue.close
      collect
      puts seen.tally.inspect
      puts per_request.inspect
      puts ITEMS.sort.to_h.inspect
    RUBY
    assert_equal({ [200, :ok, 10] => N }.inspect, out[0])
    calls = eval(out[1]) # rubocop:disable Security/Eval -- our child's Hash#inspect
    # Released in batches: every one exactly once (counted below), in fewer calls than requests.
    releases = calls.slice(:rq_request_free_many, :rq_response_release_many)
    assert_equal({ rq_add_url_keyed: N }, calls.except(*releases.keys))
    assert_equal 2, releases.size, calls.inspect
    assert releases.values.all? { |n| n.between?(1, N - 1) }, releases.inspect
    assert_equal({ rq_request_free_many: N, rq_response_release_many: N }.inspect, out[2])
  end

  # The fields a completion does not copy are read from the retained response when first asked
  # for, each once.
  def test_reading_the_other_fields_calls_the_library_once_for_each
    out = counted(<<~RUBY)
      queue = RequestQueue::Queue.new
      response = nil
      queue.add(url("/bytes?n=10&header=X-A:b")) { |r| response = r }
      queue.run
      queue.close
      before = per_request
      2.times do
        raise "url" unless response.url.end_with?("header=X-A:b")
        raise "headers" unless response.headers["x-a"] == "b" && response["X-A"] == "b"
        raise "message" unless response.error_message == "" && response.metrics.bytes_down == 10
        raise "attempts" unless response.attempts == 1
      end
      puts response.frozen?
      puts per_request.to_h { |name, n| [name, n - before.fetch(name, 0)] }.reject { |_, n| n.zero? }.inspect
      puts response.header_pairs.size
    RUBY
    assert_equal "true", out[0]
    headers = Integer(out[2])
    assert_operator headers, :>=, 2
    assert_equal({ rq_response_attempts: 1, rq_response_header_at: headers, rq_response_header_count: 1,
                   rq_response_metrics: 1, rq_response_url: 1 }.inspect, out[1])
  end

  # A body above Response::EAGER_BODY is copied with everything else during the completion and
  # the library's response released at once (not held until the collector runs).
  def test_a_large_body_is_copied_whole_and_released_at_once
    size = RequestQueue::Response::EAGER_BODY + 1
    out = counted(<<~RUBY)
      queue = RequestQueue::Queue.new
      response = nil
      queue.add(url("/bytes?n=#{size}")) { |r| response = r; puts per_request.inspect }
      queue.run
      queue.close
      after = per_request
      puts [response.body.bytesize, response.headers["content-length"], response.metrics.bytes_down].inspect
      puts(per_request == after)
    RUBY
    calls = eval(out[0]) # rubocop:disable Security/Eval -- our child's Hash#inspect
    assert_equal 1, calls[:rq_response_release], calls.inspect
    assert_equal 1, calls[:rq_response_get_summary], calls.inspect
    assert_nil calls[:rq_response_retain_summary], calls.inspect
    assert_operator calls[:rq_response_header_at].to_i, :>=, 1, calls.inspect
    assert_equal [size, size.to_s, size].inspect, out[1]
    assert_equal "true", out[2], "nothing read after the completion"
  end

  # Queue#add(url) makes, completes and adds the request in one library call (rq_add_url): the
  # same request, and the same exceptions with the same messages, as adding Request.new(url).
  URL_CASES = [:good, "not a url", "http://a b/", "ftp://127.0.0.1/", "http://x\0y/", "", "http://\xFF/".b,
               5, nil].freeze

  def test_add_by_url_does_what_adding_a_request_does
    %i[suspended closed].each do |state| # (a request of an open queue may complete meanwhile)
      URL_CASES.each do |target|
        target = url("/echo") if target == :good
        outcomes = [:by_url, :by_request].map do |how|
          queue = RequestQueue::Queue.new
          queue.suspend if state == :suspended
          queue.close if state == :closed
          begin
            request = how == :by_url ? queue.add(target) { nil } : queue.add(RequestQueue::Request.new(target) { nil })
            [request.http_method, request.url, request.queue.equal?(queue), request.state, request.tag,
             request.priority, request.completed?, queue.requests == [request], queue.count]
          rescue StandardError => e
            [e.class, e.message]
          ensure
            queue.close
          end
        end
        assert_equal outcomes[0], outcomes[1], "#{target.inspect} on a #{state} queue"
      end
    end
  end

  def test_added_by_url_then_added_again
    queue = new_queue
    request = queue.add(url("/bytes?n=1")) { nil }
    error = assert_raises(RequestQueue::AlreadyAddedError) { queue.add(request) }
    assert_equal "this request was already added to a queue", error.message
    assert_raises(RequestQueue::AlreadyAddedError) { new_queue << request }
    queue.run
    assert_equal 200, request.response.status
  end

  # Requests added by URL from four threads while a fifth runs the queue: each completes exactly
  # once, with its own response (its completion may run before its add has returned).
  def test_added_by_url_from_threads_complete_once_each
    queue = new_queue(max_concurrent: 16, duplicates: :allow)
    done = Hash.new(0)
    adding = true
    runner = Thread.new do
      while adding
        queue.run(timeout: 0.05)
        Thread.pass
      end
      queue.run
    end
    threads = 4.times.map do |t|
      Thread.new do
        100.times do |i|
          request = queue.add(url("/bytes?n=#{i}&id=#{t}-#{i}")) do |r|
            done["#{r.url} #{r.body.bytesize} #{r.request.state}"] += 1
          end
          raise "not added" unless request.queue.equal?(queue)
        end
      end
    end
    threads.each(&:join)
    adding = false
    runner.join
    expected = 4.times.flat_map { |t| 100.times.map { |i| "#{url("/bytes?n=#{i}&id=#{t}-#{i}")} #{i} completed" } }
    assert_equal expected.sort, done.keys.sort
    assert_equal [1], done.values.uniq
  end
end
