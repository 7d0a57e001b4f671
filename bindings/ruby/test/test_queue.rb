# frozen_string_literal: true

require_relative "test_helper"
require "set"

# Queue behaviour: limits, order, duplicates, suspend/resume, cancel, run, IO.select, close.
class TestQueue < Minitest::Test
  def started?(*ids)
    entries = logged(*ids)
    entries.size == ids.size ? entries : nil
  end

  def test_settings_round_trip
    queue = new_queue(max_concurrent: 5, mode: :lifo, duplicates: :allow)
    assert_equal 5, queue.max_concurrent
    assert_equal :lifo, queue.mode
    assert_equal :allow, queue.duplicates
    queue.max_concurrent = 0
    queue.mode = :fifo
    queue.duplicates = :cancel_earlier
    assert_equal [0, :fifo, :cancel_earlier], [queue.max_concurrent, queue.mode, queue.duplicates]
    defaults = new_queue
    assert_equal [2, :fifo, :cancel_earlier], [defaults.max_concurrent, defaults.mode, defaults.duplicates]
    refute defaults.suspended?
  end

  def test_max_concurrent_limits_what_the_server_sees
    queue = new_queue(max_concurrent: 2)
    done = []
    6.times { |i| queue.add(url("/delay?s=0.3&group=two&id=c#{i}")) { |r| done << r.status } }
    assert queue.run
    assert_equal [200] * 6, done
    assert_equal 2, Fixture.log["peaks"]["two"]
  end

  def test_unlimited_runs_everything_at_once
    queue = new_queue(max_concurrent: 0)
    5.times { |i| queue.add(url("/delay?s=0.5&group=all&id=u#{i}")) }
    assert queue.run
    assert_equal 5, Fixture.log["peaks"]["all"]
  end

  def test_raising_the_limit_starts_waiting_requests_at_once
    queue = new_queue(max_concurrent: 1)
    requests = 3.times.map { |i| queue.add(url("/stall?s=30&id=r#{i}")) }
    wait_for("the first request to start") { started?("r0") }
    assert_equal %i[running waiting waiting], requests.map(&:state)
    queue.max_concurrent = 3
    wait_for("all three to start") { started?("r0", "r1", "r2") }
    queue.cancel_all
    assert queue.run
  end

  def start_order(mode)
    queue = new_queue(max_concurrent: 1, mode: mode).suspend
    order = []
    requests = %w[a b c].map { |id| queue.add(url("/bytes?n=1&id=#{mode}-#{id}")) { order << id } }
    assert_equal requests.map(&:state), %i[waiting waiting waiting]
    snapshot = queue.requests
    queue.resume
    assert queue.run
    seen = logged.sort_by { |e| e["seq"] }.map { |e| e["id"].split("-").last }
    [snapshot.map { |r| requests.index(r) }, order, seen]
  end

  def test_fifo_starts_in_the_order_added
    snapshot, completed, seen = start_order(:fifo)
    assert_equal [0, 1, 2], snapshot
    assert_equal %w[a b c], completed
    assert_equal %w[a b c], seen
  end

  def test_lifo_starts_the_newest_first
    snapshot, completed, seen = start_order(:lifo)
    assert_equal [2, 1, 0], snapshot
    assert_equal %w[c b a], completed
    assert_equal %w[c b a], seen
  end

  def test_an_equal_request_cancels_the_earlier_one
    queue = new_queue
    first = queue.add(url("/stall?s=30&id=dup"), method: :post, body: "same")
    second = queue.add(url("/stall?s=30&id=dup"), method: :post, body: "same")
    different = queue.add(url("/stall?s=30&id=dup"), method: :post, body: "other")
    dispatch_until(queue) { first.completed? }
    assert first.response.cancelled?
    assert_instance_of RequestQueue::CancelledError, first.response.error
    assert_equal [second, different].to_set, queue.requests.to_set
    queue.cancel_all
    queue.run
  end

  def test_duplicates_allowed_are_all_sent
    queue = new_queue(duplicates: :allow)
    queue.suspend # so that none completes before the count
    3.times { queue.add(url("/bytes?n=2&id=same")) }
    assert_equal 3, queue.count
    queue.resume
    assert queue.run
    assert_equal 3, logged("same").size
  end

  def test_suspend_holds_waiting_requests_and_resume_starts_them
    queue = new_queue.suspend
    assert queue.suspended?
    assert_same queue, queue.suspend
    statuses = []
    requests = 3.times.map { |i| queue.add(url("/bytes?n=1&id=s#{i}")) { |r| statuses << r.status } }
    assert_equal 3, queue.count
    assert_equal requests, queue.requests
    refute queue.run(timeout: 0.2), "a suspended queue with waiting requests is not idle"
    assert_equal %i[waiting waiting waiting], requests.map(&:state)
    assert_empty logged("s0", "s1", "s2")
    queue.resume
    refute queue.suspended?
    assert queue.run
    assert_equal [200, 200, 200], statuses
    assert_equal 3, logged("s0", "s1", "s2").size
    assert_equal 0, queue.count
    assert queue.idle?
  end

  def test_cancel_a_running_request
    queue = new_queue
    response = nil
    request = queue.add(url("/stall?s=30&id=run")) { |r| response = r }
    wait_for("the request to reach the server") { started?("run") }
    assert_equal :running, request.state
    assert request.cancel
    refute request.cancel, "a second cancel finds nothing to cancel"
    assert queue.run
    assert response.cancelled?
    assert_raises(RequestQueue::CancelledError) { response.value! }
    wait_for("the server to see the connection closed") { logged("run").first["end"] }
  end

  def test_cancel_a_waiting_request_that_never_starts
    queue = new_queue.suspend
    response = nil
    request = queue.add(url("/bytes?n=1&id=never")) { |r| response = r }
    assert queue.cancel(request)
    assert_equal 0, queue.count
    assert queue.run
    assert_equal :cancelled, response.outcome
    assert_equal 0, response.attempts
    queue.resume
    assert_empty logged("never")
  end

  def test_cancel_all
    queue = new_queue(max_concurrent: 2)
    outcomes = []
    5.times { |i| queue.add(url("/stall?s=30&id=all#{i}")) { |r| outcomes << r.outcome } }
    wait_for("the first request to start") { started?("all0") }
    assert_same queue, queue.cancel_all
    assert_equal 0, queue.count
    assert queue.run
    assert_equal [:cancelled] * 5, outcomes
    queue.add(url("/bytes?n=1")) { |r| outcomes << r.outcome }
    assert queue.run
    assert_equal :ok, outcomes.last, "the queue stays usable"
  end

  def test_run_returns_at_once_when_idle_and_false_at_its_timeout
    queue = new_queue
    assert queue.run
    assert queue.run(timeout: 0)
    request = queue.add(url("/stall?s=30&id=t"))
    refute queue.run(timeout: 0.2)
    refute queue.idle?
    request.cancel
    assert queue.run
  end

  def test_io_select_on_the_queue
    queue = new_queue
    assert_kind_of IO, queue.to_io
    assert_equal queue.to_io.fileno, queue.fileno
    assert_nil IO.select([queue], nil, nil, 0), "nothing pending, not readable"
    got = nil
    queue.add(url("/bytes?n=4")) { |r| got = r.body }
    ready = IO.select([queue], nil, nil, 20)
    assert_equal [queue], ready&.first
    assert_equal 1, queue.dispatch
    assert_equal "abcd", got
    assert_nil IO.select([queue], nil, nil, 0), "dispatched: not readable any more"
    assert_equal 0, queue.dispatch
  end

  def test_dispatch_runs_at_most_max_callbacks
    queue = new_queue(max_concurrent: 0).suspend
    done = []
    3.times { |i| queue.add(url("/bytes?n=1")) { done << i } }
    queue.cancel_all
    assert_equal 1, queue.dispatch(1)
    assert_equal [0], done
    assert_equal 2, queue.dispatch
    assert_equal [0, 1, 2], done
  end

  def test_callbacks_run_on_the_dispatching_thread
    threads = []
    runner = Thread.new do
      queue = RequestQueue::Queue.new(max_concurrent: 0)
      begin
        3.times do |i|
          queue.add(url("/bytes?n=70000&id=t#{i}"),
                    on_download_progress: proc { threads << Thread.current }) { threads << Thread.current }
        end
        queue.add(url("/basic-auth/u/p"),
                  on_auth: proc { |c| threads << Thread.current; c.use_credential("u", "p") }) { threads << Thread.current }
        assert queue.run(timeout: 60)
        Thread.current
      ensure
        queue.close
      end
    end
    thread = runner.value
    refute_same Thread.main, thread
    assert_operator threads.size, :>=, 3 * 2 + 2
    assert_equal [thread], threads.uniq
  end

  def test_requests_added_from_callbacks_are_run_too
    queue = new_queue
    chain = []
    step = lambda do |n|
      queue.add(url("/bytes?n=#{n}")) do |r|
        chain << r.body.size
        step.call(n + 1) if n < 3
      end
    end
    step.call(1)
    assert queue.run
    assert_equal [1, 2, 3], chain
  end

  def test_queue_calls_from_inside_a_callback
    queue = new_queue
    inner = {}
    queue.add(url("/bytes?n=1")) do
      queue.suspend
      inner[:suspended] = queue.suspended?
      queue.resume
      inner[:count] = queue.count
      inner[:max] = queue.max_concurrent
    end
    assert queue.run
    assert_equal({ suspended: true, count: 0, max: 2 }, inner)
  end

  def test_dispatch_and_close_from_a_callback_raise_would_deadlock
    queue = new_queue
    queue.add(url("/bytes?n=1")) { queue.dispatch }
    assert_raises(RequestQueue::WouldDeadlockError) { queue.run }
    queue.add(url("/bytes?n=1")) { queue.close }
    assert_raises(RequestQueue::WouldDeadlockError) { queue.run }
    refute queue.closed?
    queue.add(url("/bytes?n=1")) { queue.run }
    assert_raises(RequestQueue::WouldDeadlockError) { queue.run }
  end

  class Boom < StandardError; end

  def test_an_exception_in_a_block_is_raised_by_run_and_the_rest_goes_on
    queue = new_queue(max_concurrent: 1)
    done = []
    queue.add(url("/bytes?n=1&id=e1")) { raise Boom, "from the block" }
    queue.add(url("/bytes?n=2&id=e2")) { |r| done << r.body.size }
    error = assert_raises(Boom) { queue.run }
    assert_equal "from the block", error.message
    assert queue.run
    assert_equal [2], done
  end

  def test_close_delivers_cancellations_before_returning
    queue = RequestQueue::Queue.new
    outcomes = []
    3.times { |i| queue.add(url("/stall?s=30&id=close#{i}")) { |r| outcomes << [r.outcome, r.error_message] } }
    wait_for("the first request to start") { started?("close0") }
    queue.close
    assert queue.closed?
    assert_equal [[:cancelled, "the queue was freed"]] * 3, outcomes
    assert_nil queue.close
    assert_raises(RequestQueue::QueueClosedError) { queue.add(url("/")) }
    assert_raises(RequestQueue::QueueClosedError) { queue.count }
    assert_raises(RequestQueue::QueueClosedError) { queue.to_io }
    assert_equal "#<RequestQueue::Queue closed>", queue.inspect
  end

  def test_open_closes_after_the_block
    kept = nil
    result = RequestQueue::Queue.open(max_concurrent: 3) do |queue|
      kept = queue
      assert_equal 3, queue.max_concurrent
      :value
    end
    assert_equal :value, result
    assert kept.closed?
  end

  def test_run_from_two_threads_and_adds_from_a_third
    queue = new_queue(max_concurrent: 0)
    5.times do |round|
      done = Queue.new
      adder = Thread.new { 10.times { |i| queue.add(url("/bytes?n=#{i}")) { |r| done << r.body.size } } }
      adder.join
      # Whichever thread dispatches the last completion, both runs must see the queue idle.
      runners = 2.times.map { Thread.new { queue.run(timeout: 60) } }
      assert_equal [true, true], runners.map(&:value), "round #{round}"
      assert_equal (0...10).to_a, Array.new(10) { done.pop }.sort
    end
  end

  def test_run_returns_when_another_thread_dispatches_the_last_completion
    queue = new_queue
    got = nil
    queue.add(url("/bytes?n=1")) { |r| got = r }
    runner = Thread.new { queue.run(timeout: 60) }
    until got # this thread and the runner both dispatch: either may run the completion
      IO.select([queue], nil, nil, 0.05)
      queue.dispatch
    end
    assert_equal true, runner.value
  end

  def test_run_returns_when_another_thread_closes_the_queue
    queue = new_queue
    response = nil
    queue.add(url("/stall?s=30&id=other")) { |r| response = r }
    wait_for("the request to start") { started?("other") }
    runner = Thread.new { queue.run(timeout: 60) }
    Thread.pass until runner.status == "sleep"
    queue.close
    assert_equal true, runner.value
    assert response.cancelled?
  end
end
