# frozen_string_literal: true

require_relative "test_helper"

# The garbage collector and the gem: finalizers never take a Mutex nor call the library (they
# run in a restricted context: Mutex#lock raises "can't be called from trap context" there), so
# GC.stress prints no "Exception in finalizer"; what they let go of is still released (by the
# reaper thread); a queue dropped without #close is freed, its threads and descriptors returned.
# Each case runs in a child Ruby.
class TestCollector < Minitest::Test
  # Counts the library's frees in the child, by thread: a free made inside a finalizer runs on
  # whatever thread Ruby collected on (main here); the reaper's are on "requestqueue-reaper".
  WATCH = <<~'RUBY'
    FREES = Hash.new(0)
    module WatchFrees
      %i[rq_request_free rq_request_free_many rq_queue_free].each do |name|
        define_method(name) do |*args|
          thread = Thread.current == Thread.main ? "main" : Thread.current.name || "a thread"
          FREES["#{name} on #{thread}"] += 1
          super(*args)
        end
      end
    end
    RequestQueue::Native.singleton_class.prepend(WatchFrees)
    def resources = [Dir.children("/proc/self/task").size, Dir.children("/proc/self/fd").size]
    def url(path) = "http://127.0.0.1:#{PORT}#{path}"
  RUBY

  def run_watched(code, limit: 120)
    status, out, err = run_child(WATCH + code, limit: limit)
    assert status.success?, "exit status #{status.inspect}, stderr: #{err}"
    [out, err]
  end

  def test_the_issues_script_prints_no_exception_in_finalizer
    out, err = run_watched(<<~RUBY)
      50.times { RequestQueue::Queue.new }
      GC.stress = true
      junk = []
      500.times { junk << "x" * 10 }
      GC.stress = false
      RequestQueue::Reaper.wait
      puts FREES.sort.inspect
    RUBY
    assert_equal "", err
    assert_equal %([["rq_queue_free on requestqueue-reaper", 50]]\n), out
  end

  def test_requests_and_queues_in_many_shapes_under_gc_stress
    refused = Fixture.get_json("/_/refuse-then-accept?after=3600")["port"]
    out, err = run_watched(<<~RUBY)
      REFUSED = "http://127.0.0.1:#{refused}"
      seen = []
      kept = []
      queue = RequestQueue::Queue.new(max_concurrent: 4, duplicates: :allow)
      GC.stress = true
      3.times do |i|
        RequestQueue::Request.new(url("/bytes?n=1"))                                  # never added
        queue.add(REFUSED + "/\#{i}") { |r| seen << r.outcome; GC.start }              # failed
        queue.add(url("/bytes?n=3&id=gc"), on_download_progress: proc { GC.start }) { |r| kept << r } # succeeded
        queue.add(url("/stall?s=3600&id=gc-stall\#{i}")) { |r| seen << r.outcome }.cancel  # cancelled
        queue.add(url("/basic-auth/u/p"), on_auth: proc { |c| c.use_credential("u", "p") }) { |r| seen << r.status }
        dropped = RequestQueue::Queue.new                                               # dropped with a request in flight
        dropped.add(url("/stall?s=3600&id=gc-dropped")) { puts "a dropped queue's block ran" }
      end
      threads = 2.times.map do |t|
        Thread.new do
          own = RequestQueue::Queue.new
          own.add(REFUSED + "/t\#{t}") { |r| seen << r.outcome }
          own.add(url("/bytes?n=2")) { |r| seen << r.body }
          own.run
          own.close
        end
      end
      queue.run
      threads.each(&:join)
      GC.stress = false
      queue.close
      GC.start
      RequestQueue::Reaper.wait
      GC.stress = true
      puts seen.map(&:to_s).tally.sort.inspect
      puts kept.map { |r| [r.body, r["content-length"], r.url.end_with?("id=gc"), r.metrics.bytes_down] }.inspect # (read after the queue was closed, under GC.stress)
      GC.stress = false
      puts FREES.keys.grep(/rq_request_free/).sort.inspect
      puts FREES.select { |k, _| k.start_with?("rq_queue_free") }.sort.inspect
      puts RequestQueue::Queue::OPEN.size
    RUBY
    assert_equal "", err
    assert_equal [%([["200", 3], ["ab", 2], ["cancelled", 3], ["cannot_connect", 5]]),
                  %([["abc", "3", true, 3], ["abc", "3", true, 3], ["abc", "3", true, 3]]),
                  # The collected requests and the dropped queues were freed by the reaper
                  # thread, never inside a finalizer; the others by #close.
                  # (in batches: rq_request_free_many)
                  %(["rq_request_free_many on requestqueue-reaper"]),
                  %([["rq_queue_free on a thread", 2], ["rq_queue_free on main", 1], ) +
                    %(["rq_queue_free on requestqueue-reaper", 3]]),
                  "0"], out.lines.map(&:chomp)
  end

  def test_dropped_queues_are_freed
    out, err = run_watched(<<~RUBY)
      require "json"
      require "net/http"
      def still_running
        log = JSON.parse(Net::HTTP.get(URI(url("/_/log"))))["requests"]
        log.count { |e| e["id"] == "dropped" && !e["end"] }
      end
      RequestQueue::Queue.new.close   # the library and the reaper are set up
      GC.start
      baseline = resources

      shapes = {
        idle: -> { RequestQueue::Queue.new },
        in_flight: lambda {
          q = RequestQueue::Queue.new(max_concurrent: 2)
          3.times { |i| q.add(url("/stall?s=3600&id=dropped&i=\#{i}")) { puts "block ran" } }
        },
        referencing_itself: lambda {
          q = RequestQueue::Queue.new
          q.add(url("/stall?s=3600&id=dropped")) { q.add(url("/")) }
        },
        completed_not_dispatched: lambda {
          q = RequestQueue::Queue.new
          q.add(url("/bytes?n=1")) { puts "block ran" }
          IO.select([q])
        },
      }
      shapes.each_value { |make| 25.times { make.call } }
      4.times { GC.start(full_mark: true, immediate_sweep: true) }
      RequestQueue::Reaper.wait
      puts "after 100 dropped queues: \#{resources == baseline ? "baseline" : [baseline, resources].inspect}"
      puts "open: \#{RequestQueue::Queue::OPEN.size}"
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
      sleep 0.05 while still_running.positive? && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      puts "still running at the server: \#{still_running}"
    RUBY
    assert_equal "", err
    assert_equal "after 100 dropped queues: baseline\nopen: 0\nstill running at the server: 0\n", out
    refute_empty logged("dropped"), "the requests reached the server"
  end
end
