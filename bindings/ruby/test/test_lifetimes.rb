# frozen_string_literal: true

require_relative "test_helper"

# Lifetimes: blocks kept alive until their completion, handles released by the garbage collector,
# exit with requests in flight, fork, and signals during a run.
class TestLifetimes < Minitest::Test
  def add_many(queue, results, count)
    count.times do |i|
      payload = "payload-#{i}" * 10 # only referenced from the block
      queue.add(url("/bytes?n=#{i}"), on_download_progress: proc { payload.size }) do |response|
        results << [i, response.body.bytesize, payload]
      end
    end
    nil
  end

  def test_blocks_stay_referenced_until_their_completion
    queue = new_queue(max_concurrent: 0)
    results = []
    add_many(queue, results, 20)
    GC.start(full_mark: true, immediate_sweep: true)
    GC.compact if GC.respond_to?(:compact)
    assert queue.run
    assert_equal (0...20).map { |i| [i, i, "payload-#{i}" * 10] }, results.sort_by(&:first)
    assert_empty queue.instance_variable_get(:@state).outstanding, "the queue let go of the requests"
  end

  def test_under_gc_stress
    queue = new_queue
    results = []
    GC.stress = true
    begin
      add_many(queue, results, 3)
      queue.run
    ensure
      GC.stress = false
    end
    assert_equal [0, 1, 2], results.map(&:first).sort
  end

  def test_the_request_handle_can_be_released_before_completion
    queue = new_queue.suspend
    response = nil
    request = queue.add(url("/bytes?n=5")) { |r| response = r }
    request.instance_variable_get(:@pointer).free # what the garbage collector does
    queue.resume
    assert queue.run
    assert_equal "abcde", response.body
  end

  def make_idle_queues(count)
    count.times { RequestQueue::Queue.new }
    nil
  end

  def test_an_unreferenced_queue_is_freed_by_the_garbage_collector
    keys_before = RequestQueue::Queue::OPEN.keys
    threads_before = Dir.children("/proc/self/task").size
    Thread.new { make_idle_queues(10) }.join # no stack keeps a reference once the thread is gone
    created = RequestQueue::Queue::OPEN.keys - keys_before
    assert_equal 10, created.size
    threads_with = Dir.children("/proc/self/task").size
    assert_operator threads_with, :>, threads_before, "each queue runs an engine thread"
    3.times { GC.start(full_mark: true, immediate_sweep: true) }
    RequestQueue::Reaper.wait # (the finalizers hand the native queues to the reaper thread)
    assert_empty RequestQueue::Queue::OPEN.keys & created, "the native queues were freed"
    assert_operator Dir.children("/proc/self/task").size, :<, threads_with
  end

  def test_process_exits_cleanly_with_requests_in_flight
    code = <<~RUBY
      # Registered before the gem's own exit hook, so it runs after it.
      at_exit { puts "after exit hook: \#{RequestQueue::Queue::OPEN.size} open, \#{Dir.children("/proc/self/task").size} threads" }
      queue = RequestQueue::Queue.new(max_concurrent: 0)
      queue.add("http://127.0.0.1:\#{PORT}/bytes?n=1") { puts "first done" }
      3.times { |i| queue.add("http://127.0.0.1:\#{PORT}/stall?s=30&id=exit\#{i}") { puts "completion at exit" } }
      queue.add("http://127.0.0.1:\#{PORT}/basic-auth/u/p", on_auth: proc { puts "challenge left unanswered" }) { puts "auth done" }
      seen = 0
      until seen == 2
        IO.select([queue])
        seen = queue.dispatch + seen
      end
      puts "exiting"
    RUBY
    status, out, err = run_child(code)
    assert status.success?, "exit status #{status.inspect}, stderr: #{err}"
    assert_equal "", err
    lines = out.lines.map(&:chomp)
    assert_equal ["challenge left unanswered", "first done"], lines[0, 2].sort
    assert_equal "exiting", lines[2]
    assert_match(/\Aafter exit hook: 0 open, \d+ threads\z/, lines[3], "the queue was freed at exit, blocks not called")
    assert_equal 4, lines.size
    wait_for("the server to see the stalled connection closed") do
      entries = logged("exit0")
      entries.size == 1 && entries[0]["end"]
    end
  end

  def test_exit_from_a_block_exits_with_its_status
    code = <<~RUBY
      queue = RequestQueue::Queue.new
      queue.add("http://127.0.0.1:\#{PORT}/bytes?n=1") { exit 7 }
      queue.add("http://127.0.0.1:\#{PORT}/stall?s=30")
      queue.run
      puts "not reached"
    RUBY
    status, out, err = run_child(code)
    assert_equal 7, status.exitstatus
    assert_equal "", out
    assert_equal "", err
  end

  def test_fork_child_leaves_the_parents_queue_alone
    queue = new_queue
    response = nil
    request = queue.add(url("/stall?s=30&id=fork")) { |r| response = r }
    wait_for("the request to start") { logged("fork").any? }
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      report = []
      begin
        queue.count
        report << "parent queue usable"
      rescue RequestQueue::QueueClosedError => e # the library refuses it (see "Fork" in the header)
        report << (e.message.include?("fork()") ? "parent queue refused" : "refused: #{e.message}")
      end
      # What the inherited exit hook and the garbage collector would do in this child:
      RequestQueue::Queue.close_all_at_exit
      queue.instance_variable_get(:@pointer).free
      request.instance_variable_get(:@pointer).free
      report << (request.completed? ? "parent request completed in the child" : "parent request untouched")
      fresh = RequestQueue::Queue.new
      fresh.add(url("/bytes?n=3&id=child")) { |r| report << "child got #{r.body}" }
      report << (fresh.run(timeout: 20) ? "child idle" : "child timeout")
      writer.puts report.join(";")
      writer.close
      exit 0 # runs the inherited at_exit hooks and finalizers: they must skip the parent's queue
    end
    writer.close
    line = Timeout.timeout(60) { reader.read }
    status = Timeout.timeout(60) { Process.wait2(pid).last }
    assert status.success?, "child exit status #{status.inspect}"
    assert_equal "parent queue refused;parent request untouched;child got abc;child idle", line.strip
    assert_equal 1, queue.count, "the parent's request still runs"
    assert_equal :running, request.state
    assert_nil logged("fork").first["end"], "the parent's connection is still open"
    assert request.cancel
    assert queue.run
    assert response.cancelled?
  end

  def signal_during_run(signal)
    code = <<~RUBY
      queue = RequestQueue::Queue.new(max_concurrent: 0)
      queue.add("http://127.0.0.1:\#{PORT}/bytes?n=1") { puts "running" }
      queue.add("http://127.0.0.1:\#{PORT}/stall?s=30&id=sig")
      queue.run
      puts "run returned"
    RUBY
    run_child(code) { |line, pid| Process.kill(signal, pid) if line == "running\n" }
  end

  def test_sigterm_during_run_terminates_the_process
    status, out, err = signal_during_run(:TERM)
    assert_equal Signal.list["TERM"], status.termsig, "status #{status.inspect}, stderr: #{err}"
    assert_equal "running\n", out
  end

  def test_ctrl_c_during_run_interrupts_it
    status, out, err = signal_during_run(:INT)
    assert_equal Signal.list["INT"], status.termsig, "status #{status.inspect}, stderr: #{err}"
    assert_equal "running\n", out
  end

  def test_interrupt_can_be_rescued_and_the_queue_used_again
    code = <<~RUBY
      queue = RequestQueue::Queue.new(max_concurrent: 0)
      queue.add("http://127.0.0.1:\#{PORT}/bytes?n=1") { puts "running" }
      stalled = queue.add("http://127.0.0.1:\#{PORT}/stall?s=30")
      begin
        queue.run
      rescue Interrupt
        puts "interrupted"
      end
      stalled.cancel
      queue.run
      puts stalled.response.outcome
      queue.close
    RUBY
    status, out, err = run_child(code) { |line, pid| Process.kill(:INT, pid) if line == "running\n" }
    assert status.success?, "status #{status.inspect}, stderr: #{err}"
    assert_equal "running\ninterrupted\ncancelled\n", out
  end
end
