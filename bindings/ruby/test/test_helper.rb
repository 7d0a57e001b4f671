# frozen_string_literal: true

# Shared setup of the minitest suite: loads the gem from lib/, starts the fixture server
# (Tests/Fixtures/fixture_server.py, loopback only) once for the whole run, and gives helpers
# to read what the server observed.
#
# Run: REQUESTQUEUE_LIBRARY=/path/to/librequestqueue.so ruby -Ilib -Itest -e 'Dir["test/test_*.rb"].each { |f| require_relative f }'
# or simply scripts/test-ruby from the repository root.

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "minitest/autorun"
require "json"
require "net/http"
require "rbconfig"
require "timeout"
require "requestqueue"

# The suite tests this checkout's lib/, never a copy of the gem installed elsewhere.
loaded = $LOADED_FEATURES.grep(%r{/requestqueue\.rb\z})
unless loaded == [File.expand_path("../lib/requestqueue.rb", __dir__)]
  abort "test_helper: the suite loaded #{loaded.inspect}, not #{File.expand_path("../lib", __dir__)}"
end

module Fixture
  ROOT = File.expand_path("../../..", __dir__)
  SERVER = ENV["RQ_FIXTURE_SERVER"] || File.join(ROOT, "Tests/Fixtures/fixture_server.py")

  class << self
    attr_reader :port

    def start
      return if @io

      raise "fixture server not found at #{SERVER} (set RQ_FIXTURE_SERVER)" unless File.exist?(SERVER)

      @io = IO.popen(["python3", SERVER, "--exit-on-stdin-eof"], "r+")
      line = @io.gets
      @port = line && line[/\APORT (\d+)/, 1]
      raise "fixture server did not start (first line #{line.inspect})" unless @port

      Minitest.after_run { stop }
    end

    def stop
      return unless @io

      @io.close_write
      Process.wait(@io.pid)
      @io.close
      @io = nil
    end

    def url(path)
      "http://127.0.0.1:#{port}#{path}"
    end

    def get_json(path, method: :get)
      Net::HTTP.start("127.0.0.1", port) do |http|
        response = method == :post ? http.post(path, "", "Content-Type" => "text/plain") : http.get(path)
        JSON.parse(response.body)
      end
    end

    def log
      get_json("/_/log")
    end

    def clear
      get_json("/_/clear", method: :post)
    end
  end
end

Fixture.start

module RequestQueueTestHelpers
  # Path of the C library under test, for child Ruby processes.
  LIBRARY = ENV["REQUESTQUEUE_LIBRARY"]
  LIB_DIR = File.expand_path("../lib", __dir__)

  # A test that has not finished after this many seconds is stopped (its thread backtraces are
  # printed) so that a hang fails the suite instead of stalling it.
  TEST_LIMIT = 120

  class Hang < StandardError; end

  def setup
    Fixture.clear
    @queues = []
    test_thread = Thread.current
    @watchdog = Thread.new do
      sleep TEST_LIMIT
      Thread.list.each { |t| warn "#{t.inspect}\n  #{(t.backtrace || []).join("\n  ")}" }
      test_thread.raise(Hang, "#{name} still running after #{TEST_LIMIT} s")
    end
  end

  def teardown
    @watchdog&.kill
    @queues.each { |q| q.close unless q.closed? }
  end

  def new_queue(**options)
    queue = RequestQueue::Queue.new(**options)
    @queues << queue
    queue
  end

  def url(path)
    Fixture.url(path)
  end

  # The server's log entries whose id= parameter is one of `ids` (all entries without ids).
  def logged(*ids)
    entries = Fixture.log["requests"]
    ids.empty? ? entries : entries.select { |e| ids.include?(e["id"]) }
  end

  # Waits for a fact the server reports (polling its log), up to a generous limit that only
  # guards against a hang; the assertion is on the fact, not on the time.
  def wait_for(what, limit: 20)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + limit
    loop do
      result = yield
      return result if result
      flunk "timed out waiting for #{what}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.02
    end
  end

  # Waits on the queue's descriptor and dispatches until the block is true.
  def dispatch_until(queue, limit: 20)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + limit
    until yield
      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      flunk "timed out dispatching" if left <= 0
      IO.select([queue], nil, nil, left)
      queue.dispatch
    end
  end

  # Runs `code` in a child Ruby that has loaded the gem; returns [status, stdout, stderr].
  # `on_line` is called with each line the child prints (and the child's pid) as it comes.
  def run_child(code, env: {}, limit: 60, &on_line)
    script = "$stdout.sync = true\nrequire 'requestqueue'\nPORT = #{Fixture.port}\n#{code}"
    out_r, out_w = IO.pipe
    err_r, err_w = IO.pipe
    pid = Process.spawn(env, RbConfig.ruby, "-I", LIB_DIR, "-e", script, out: out_w, err: err_w)
    out_w.close
    err_w.close
    err_reader = Thread.new { err_r.read }
    out = +""
    status = nil
    begin
      Timeout.timeout(limit) do
        while (line = out_r.gets)
          out << line
          on_line&.call(line, pid)
        end
        status = Process.wait2(pid).last
      end
    rescue Timeout::Error
      Process.kill(:KILL, pid)
      Process.wait(pid)
      flunk "child process still running after #{limit} s; output so far:\n#{out}#{err_reader.value}"
    end
    [status, out, err_reader.value]
  end
end

class Minitest::Test
  include RequestQueueTestHelpers
end
