# frozen_string_literal: true

require_relative "test_helper"
require "socket"
require "tmpdir"
require "open3"

# What a newcomer does after reading only the READMEs: short, plain scripts, each run in its own
# `ruby -w` (warnings on) against the fixture server, with what they print checked whole and
# nothing on stderr. Also the README's runnable examples, as written.
class TestNewcomer < Minitest::Test
  README = File.expand_path("../README.md", __dir__)

  # Runs `code` in `ruby -w` with the gem of lib/; returns [status, stdout, stderr].
  def run_script(code, limit: 60)
    # HOLD: a request the fixture server holds, its head sent, until the client leaves (it then ends
    # it: no request is left running on the shared server after the script).
    hold = url("/hold?n=1&key=newcomer-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}")
    script = "$stdout.sync = true\nrequire 'requestqueue'\nBASE = #{url("").inspect}\nHOLD = #{hold.inspect}\n#{code}"
    out_r, out_w = IO.pipe
    err_r, err_w = IO.pipe
    pid = Process.spawn(RbConfig.ruby, "-w", "-I", LIB_DIR, "-e", script, out: out_w, err: err_w)
    out_w.close
    err_w.close
    readers = [out_r, err_r].map { |io| Thread.new { io.read } }
    status = nil
    begin
      Timeout.timeout(limit) { status = Process.wait2(pid).last }
    rescue Timeout::Error
      Process.kill(:KILL, pid)
      Process.wait(pid)
      flunk "script still running after #{limit} s: #{readers.map(&:value).join}"
    end
    [status, *readers.map(&:value)]
  end

  def assert_clean(code, expected_stdout, exitstatus: 0)
    status, out, err = run_script(code)
    assert_equal "", err
    assert_equal expected_stdout, out
    assert_equal exitstatus, status.exitstatus
  end

  def test_text_decodes_the_body_with_its_charset
    # (Ruby knows no encoding named "latin-1", Python's and many servers' name for ISO-8859-1; a
    # charset Ruby does not know at all, such as hp-roman8, is read as UTF-8.)
    assert_clean(<<~RUBY, "caf\u00e9 UTF-8 latin-1\ncaf\u00e9 UTF-8 ISO-8859-1\ncaf\u00e9 UTF-8 nil\nx UTF-8 hp-roman8\n")
      ["/text?s=caf%C3%A9&charset=latin-1", "/text?s=caf%C3%A9&charset=ISO-8859-1", "/text?s=caf%C3%A9",
       "/text?s=x&charset=hp-roman8"].each do |path|
        r = RequestQueue.request(BASE + path)
        t = r.text
        puts "\#{t.valid_encoding? ? t : "invalid"} \#{t.encoding} \#{r.charset || "nil"}"
      end
    RUBY
  end

  # A name given twice (pairs, names differing in case) sent only its last value, and an Array value
  # went out as its inspect text ("[\"1\", \"2\"]"); joined as Net::HTTP does (RFC 9110 5.3).
  def test_a_header_given_twice_or_as_an_array_is_sent_once_with_every_value
    assert_clean(<<~RUBY, "[[\"Accept\", \"a, b\"]]\n[[\"Accept\", \"a, b\"]]\n[[\"Cookie\", \"x=1; y=2\"]]\n[]\n")
      def sent(name, headers)
        RequestQueue.request(BASE + "/inspect", headers: headers).json["headers"].select { |h| h[0].casecmp?(name) }
      end
      p sent("accept", [["Accept", "a"], ["accept", "b"]])
      p sent("accept", { "Accept" => %w[a b] })
      p sent("cookie", { "Cookie" => "x=1", "cookie" => "y=2" })
      p sent("accept", [["Accept", "a"], ["Accept", nil]])
    RUBY
  end

  def test_json_option_posts_json
    assert_clean(<<~RUBY, "{\"a\":1,\"b\":[true,null]} application/json\n[\"application/vnd.x+json\"]\nArgumentError\n")
      r = RequestQueue.request(BASE + "/echo", method: :post, json: { a: 1, b: [true, nil] })
      puts "\#{r.json["body"]} \#{r.json["headers"]["content-type"]}"
      r = RequestQueue.request(BASE + "/echo", method: :put, json: [1], headers: { "Content-Type" => "application/vnd.x+json" })
      p [r.json["headers"]["content-type"]]
      begin
        RequestQueue.request(BASE + "/echo", json: 1, body: "x")
      rescue ArgumentError
        puts "ArgumentError"
      end
    RUBY
  end

  # As Typhoeus (Ethon), Faraday and Net::HTTP do: method: "post" is a POST.
  def test_a_method_in_lower_case_is_sent_in_upper_case
    assert_clean(<<~RUBY, "[\"POST\", \"PUT\", \"DELETE\"]\n\"PATCH\"\n")
      p(["post", "Put", :delete].map { |m| RequestQueue.request(BASE + "/echo", method: m, body: "x").json["method"] })
      p RequestQueue::Request.new(BASE + "/echo", method: "patch").http_method
    RUBY
  end

  def test_fetch_post_headers_errors
    port = closed_port
    assert_clean(<<~RUBY, "200 hello\nabc\ncannot_connect RequestQueue::CannotConnectError\nRequestQueue::InvalidURLError\ntimeout true\n404 true\n")
      r = RequestQueue.request(BASE + "/text?s=hello")
      puts "\#{r.status} \#{r.body}"
      puts RequestQueue.request(BASE + "/headers", headers: { "X-Token" => "abc" }, timeout: 5).json["x-token"]
      r = RequestQueue.request("http://127.0.0.1:#{port}/")
      puts "\#{r.outcome} \#{r.error.class}"
      begin
        RequestQueue.request("not a url")
      rescue RequestQueue::InvalidArgumentError => e
        puts e.class
      end
      r = RequestQueue.request(BASE + "/delay?s=1", timeout: 0.3)
      puts "\#{r.outcome} \#{r.timed_out?}"
      r = RequestQueue.request(BASE + "/status/404")
      begin
        r.value!
      rescue RequestQueue::HTTPStatusError => e
        puts "\#{e.status} \#{e.response.equal?(r)}"
      end
    RUBY
  end

  def test_priorities_cancel_exceptions_and_use_after_close
    assert_clean(<<~RUBY, "true\ncancelled\n[:first, :high, :low]\nRuntimeError boom\n\"ab\"\nRequestQueue::QueueClosedError\n")
      q = RequestQueue::Queue.new(max_concurrent: 1)
      order = []
      q.add(BASE + "/delay?s=0.2") { order << :first }
      q.add(BASE + "/bytes?n=1&id=lo", priority: :low) { order << :low }
      q.add(BASE + "/bytes?n=1&id=hi", priority: :high) { order << :high }
      p q.add(BASE + "/bytes?n=1&id=c") { |r| puts r.outcome }.cancel
      q.run
      q.run
      p order
      q.add(BASE + "/bytes?n=2") { raise "boom" }
      begin
        q.run
      rescue => e
        puts "\#{e.class} \#{e.message}"
      end
      q.add(BASE + "/bytes?n=2") { |r| p r.body }
      q.run
      q.close
      q.close
      begin
        q.add(BASE + "/bytes?n=2")
      rescue RequestQueue::Error => e
        puts e.class
      end
    RUBY
  end

  def test_exit_in_a_block_and_exit_with_requests_pending
    assert_clean(<<~RUBY, "", exitstatus: 5)
      q = RequestQueue::Queue.new
      q.add(BASE + "/bytes?n=1") { exit 5 }
      q.add(HOLD) { puts "never" }
      q.run
    RUBY
    assert_clean(<<~RUBY, "leaving\n")
      q = RequestQueue::Queue.new
      3.times { |i| q.add(HOLD + "&i=\#{i}") { puts "never" } }
      puts "leaving"
    RUBY
  end

  def test_ctrl_c_during_run
    assert_clean(<<~RUBY, "Interrupt\ncancelled\n")
      q = RequestQueue::Queue.new
      q.add(HOLD) { |r| puts r.outcome }
      begin
        Thread.new { sleep 0.3; Process.kill("INT", Process.pid) }
        q.run
      rescue Interrupt
        puts "Interrupt"
      end
      q.close
    RUBY
  end

  def test_threads_and_fork
    assert_clean(<<~RUBY, "child: RequestQueue::QueueClosedError\nchild: 200 3\n[40, [200]]\n")
      q = RequestQueue::Queue.new(max_concurrent: 4)
      first = RequestQueue.request(BASE + "/bytes?n=3")
      pid = fork do
        begin
          q.add(BASE + "/bytes?n=3")
        rescue RequestQueue::Error => e
          puts "child: \#{e.class}"
        end
        RequestQueue::Queue.open do |q2|
          q2.add(BASE + "/bytes?n=4") { |r| puts "child: \#{r.status} \#{first.headers["content-length"]}" }
          q2.run
        end
      end
      Process.wait(pid)
      statuses = Queue.new
      threads = 4.times.map do |i|
        Thread.new { 10.times { |j| q.add(BASE + "/bytes?n=\#{i}&j=\#{j}") { |r| statuses << r.status } }; q.run }
      end
      threads.each(&:join)
      q.run
      p [statuses.size, Array.new(statuses.size) { statuses.pop }.uniq]
      q.close
    RUBY
  end

  # The README's runnable examples (the first two ruby blocks), as written, against a local
  # `python3 -m http.server` as the README says (on a free port instead of 8000).
  def readme_examples
    File.read(README).scan(/```ruby\n(.*?)```/m).flatten
  end

  def with_http_server
    Dir.mktmpdir do |root|
      File.write(File.join(root, "index.html"), "<html>hello</html>\n" * 100)
      io = IO.popen(["python3", "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", { chdir: root, err: File::NULL }])
      begin
        port = io.gets[/port (\d+)/, 1]
        yield port
      ensure
        Process.kill(:KILL, io.pid)
        io.close
      end
    end
  end

  def test_readme_fetch_example
    with_http_server do |port|
      code = readme_examples[0].gsub("127.0.0.1:8000", "127.0.0.1:#{port}")
      status, out, err = run_script(code)
      assert_equal "", err
      assert status.success?
      assert_equal ["200 http://127.0.0.1:#{port}/ (1900 bytes)", "200 http://127.0.0.1:#{port}/?page=2 (1900 bytes)",
                    "http://127.0.0.1:#{port}/missing: The server returned a 404 error"], out.lines.map(&:chomp).sort
    end
  end

  # Every example of the README is Ruby that parses as written (the reference ones use
  # placeholders such as `url`, but no "..." where Ruby would stop at a syntax error).
  def test_readme_examples_parse
    readme_examples.each_with_index do |code, i|
      RubyVM::InstructionSequence.compile(code)
    rescue SyntaxError => e
      flunk "README example #{i} does not parse: #{e.message.lines.first}"
    end
  end

  # The top-level README.md shows the same example.
  def test_root_readme_example
    root_readme = File.read(File.expand_path("../../../README.md", __dir__)).scan(/```ruby\n(.*?)```/m).flatten
    assert_equal [readme_examples[0]], root_readme
  end

  def test_readme_faraday_example
    begin
      require "faraday"
    rescue LoadError
      skip "faraday is not installed"
    end
    with_http_server do |port|
      code = readme_examples[1].gsub("127.0.0.1:8000", "127.0.0.1:#{port}")
      status, out, err = run_script(code + "p @pages.map(&:status).uniq\n")
      assert_equal "", err
      assert status.success?
      assert_equal "[200]\n", out
    end
  end

  # Middleware and callers of a Faraday response may change its body in place (force_encoding from
  # the charset, as faraday-encoding does; <<): the net_http adapter's body can be, so ours too.
  def test_faraday_body_can_be_changed_in_place
    begin
      require "faraday"
    rescue LoadError
      skip "faraday is not installed"
    end
    assert_clean(<<~RUBY, "caf\u00e9 UTF-8\nok!\n")
      require "requestqueue/faraday"
      conn = Faraday.new(url: BASE) { |f| f.adapter :requestqueue }
      body = conn.get("/text", s: "caf\u00e9").body
      puts "\#{body.force_encoding("UTF-8")} \#{body.encoding}"
      puts conn.get("/text", s: "ok").body << "!"
    RUBY
  end

  # Installed as a gem, `require "requestqueue"` runs inside RubyGems' rescue of its first LoadError:
  # the library's LoadError then had that one as its cause, which Ruby prints last ("cannot load
  # such file -- requestqueue"), under the message that says what was tried.
  def test_a_library_that_cannot_be_loaded_is_reported_alone
    script = <<~RUBY
      begin
        raise LoadError, "cannot load such file -- requestqueue"   # as RubyGems' first attempt
      rescue LoadError
        require "requestqueue"
      end
    RUBY
    out, err, status = Open3.capture3({ "REQUESTQUEUE_LIBRARY" => "/nonexistent/librequestqueue.so" },
                                      RbConfig.ruby, "-w", "-I", LIB_DIR, "-e", script)
    refute status.success?
    assert_equal "", out
    assert_match(/librequestqueue could not be loaded\. Tried:.*\n  REQUESTQUEUE_LIBRARY=/, err)
    refute_match(/cannot load such file/, err)
  end

  private

  def closed_port
    server = TCPServer.new("127.0.0.1", 0)
    port = server.addr[1]
    server.close
    port
  end
end
