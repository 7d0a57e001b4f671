# frozen_string_literal: true

require_relative "test_helper"
require "tmpdir"

# Per-host limits, rate limits, stats, tags, coalescing, priorities, richer retries, streaming
# bodies, output files and metrics.
class TestFeatures < Minitest::Test
  PATTERN = "abcdefghijklmnopqrstuvwxyz0123456789"

  def pattern(n)
    (PATTERN * (n / PATTERN.size + 1))[0, n]
  end

  def fetch(target, **options)
    queue = new_queue
    response = nil
    queue.add(target, **options) { |r| response = r }
    assert queue.run
    response
  end

  def test_max_per_host_limits_each_origin
    queue = new_queue(max_concurrent: 0, max_per_host: 1)
    assert_equal 1, queue.max_per_host
    3.times do |i|
      queue.add(url("/delay?s=0.3&group=ip&id=ip#{i}"))
      queue.add("http://localhost:#{Fixture.port}/delay?s=0.3&group=name&id=name#{i}")
    end
    assert queue.run
    assert_equal({ "ip" => 1, "name" => 1 }, Fixture.log["peaks"].slice("ip", "name"))
    assert_equal 6, logged.size
    queue.max_per_host = 0
    assert_equal 0, queue.max_per_host
  end

  def test_rate_limit_holds_starts_until_removed
    queue = new_queue(max_concurrent: 0, rate_limit: [1, 1000])
    requests = 3.times.map { |i| queue.add(url("/bytes?n=1&id=rate#{i}")) }
    dispatch_until(queue) { requests[0].completed? }
    assert_equal %i[waiting waiting], requests[1, 2].map(&:state), "one token per 1000 s: one start"
    assert_equal ["rate0"], logged.map { |e| e["id"] }
    assert_same queue, queue.rate_limit(0)
    assert queue.run
    assert_equal 3, logged.size
    assert_raises(RequestQueue::InvalidArgumentError) { queue.rate_limit(5, per: 0) }
    assert_raises(ArgumentError) { queue.rate_limit(-1) }
    assert_raises(ArgumentError) { RequestQueue::Queue.new(rate_limit: { starts: 1, every: 2 }) }
  end

  def test_stats_count_outcomes_and_bytes
    queue = new_queue
    queue.add(url("/bytes?n=100"))
    queue.add(url("/bytes?n=50"))
    queue.add(url("/status/404"))
    queue.suspend
    queue.add(url("/bytes?n=1")).cancel
    assert queue.resume.run
    stats = queue.stats
    assert_equal 4, stats.added
    assert_equal 3, stats.started
    assert_equal 2, stats.succeeded
    assert_equal 1, stats.failed
    assert_equal 1, stats.cancelled
    assert_equal 0, stats.retried
    assert_equal 100 + 50 + "status 404".size, stats.bytes_down
    assert stats.frozen?
  end

  def test_tags_count_list_and_cancel
    queue = new_queue(max_concurrent: 0).suspend
    a = 2.times.map { |i| queue.add(url("/bytes?n=1&id=a#{i}"), tag: "a") }
    b = queue.add(url("/bytes?n=1&id=b"), tag: "b")
    assert_equal "a", a[0].tag
    assert_equal 2, queue.count(tag: "a")
    assert_equal 0, queue.count(tag: "none")
    assert_equal a, queue.requests(tag: "a")
    assert_equal 2, queue.cancel_tag("a")
    assert_equal [b], queue.requests
    assert queue.resume.run
    assert_equal %i[cancelled cancelled ok], (a + [b]).map { |r| r.response.outcome }
    assert_raises(TypeError) { queue.count(tag: :a) }
  end

  def test_coalesced_duplicates_share_one_transfer
    queue = new_queue(duplicates: :coalesce)
    assert_equal :coalesce, queue.duplicates
    bodies = []
    3.times { queue.add(url("/delay?s=0.3&id=co")) { |r| bodies << r.body } }
    assert queue.run
    assert_equal %w[ok ok ok], bodies
    assert_equal 1, logged("co").size
    assert_equal 2, queue.stats.coalesced
  end

  def test_priorities_start_higher_levels_first
    queue = new_queue(max_concurrent: 1).suspend
    low = queue.add(url("/bytes?n=1&id=low"), priority: :low)
    normal = queue.add(url("/bytes?n=1&id=normal"))
    high = queue.add(url("/bytes?n=1&id=high"), priority: :very_high)
    moved = queue.add(url("/bytes?n=1&id=moved"), priority: -2)
    assert_equal %i[low normal very_high very_low], [low, normal, high, moved].map(&:priority)
    moved.priority = :high
    assert_equal [high, moved, normal, low], queue.requests
    assert queue.resume.run
    assert_equal %w[high moved normal low], logged.sort_by { |e| e["seq"] }.map { |e| e["id"] }
    assert_raises(ArgumentError) { RequestQueue::Request.new(url("/"), priority: :urgent) }
    assert_raises(RequestQueue::InvalidArgumentError) { RequestQueue::Request.new(url("/"), priority: 3) }
  end

  def test_retry_statuses_and_non_idempotent_methods
    key = "k#{rand(1 << 30)}"
    status = fetch(url("/flaky?key=#{key}&fail=2&mode=status&code=503&id=#{key}"),
                   retry: { statuses: [503], delay: 0.01, attempts: 5, backoff: 2, max_delay: 1, jitter: 0.5 })
    assert status.ok?
    assert_equal 3, status.attempts

    key2 = "k#{rand(1 << 30)}"
    post = fetch(url("/flaky?key=#{key2}&fail=1&mode=reset&id=#{key2}"), method: :post, body: "x",
                                                                         retry: { delay: 0.01, attempts: 3 })
    assert_equal :connection_lost, post.outcome
    assert_equal 1, post.attempts, "POST is not retried unless allowed"

    key3 = "k#{rand(1 << 30)}"
    allowed = fetch(url("/flaky?key=#{key3}&fail=1&mode=reset&id=#{key3}"), method: :post, body: "x",
                                                                            retry: { delay: 0.01, attempts: 3, non_idempotent: true })
    assert allowed.ok?
    assert_equal 2, allowed.attempts

    assert_raises(RequestQueue::InvalidArgumentError) { RequestQueue::Request.new(url("/"), retry: { statuses: [200] }) }
    assert_raises(RequestQueue::InvalidArgumentError) { RequestQueue::Request.new(url("/"), retry: { backoff: 1000 }) }
    assert_raises(TypeError) { RequestQueue::Request.new(url("/"), retry: { statuses: ["503"] }) }
  end

  def test_on_body_streams_the_body_in_order
    chunks = []
    response = fetch(url("/bytes?n=300000"), on_body: proc { |chunk, offset| chunks << [offset, chunk] })
    assert response.ok?
    assert_equal "", response.body
    offsets = chunks.map(&:first)
    assert_equal 0, offsets.first
    chunks.each_cons(2) { |(o1, c1), (o2, _)| assert_equal o1 + c1.bytesize, o2 }
    assert_equal pattern(300_000), chunks.map(&:last).join
    assert chunks.all? { |_, c| c.encoding == Encoding::BINARY }
    assert_equal 300_000, response.metrics.bytes_down
  end

  def test_on_body_is_not_used_for_error_statuses
    chunks = []
    response = fetch(url("/status/404"), on_body: proc { |chunk, _| chunks << chunk })
    assert_empty chunks
    assert_equal "status 404", response.body
  end

  def test_on_head_comes_before_the_body_and_the_completion
    events = []
    response = fetch(url("/bytes?n=100000&chunked=1"), on_head: proc { |head| events << [:head, head] },
                                                      on_body: proc { |_chunk, _offset| events << :chunk unless events.last == :chunk })
    assert response.ok?
    head = events.first[1]
    assert_equal [:head, :chunk], [events[0][0], events[1]]
    assert_equal 2, events.size
    assert_equal 200, head.status
    assert_equal "", head.body
    assert_equal "chunked", head["transfer-encoding"]
    # A followed redirect has no head of its own; a 404 has one (its body comes in the response).
    heads = []
    fetch(url("/redirect/2"), on_head: proc { |h| heads << [h.status, h.url] })
    assert_equal [[200, url("/redirect/0")]], heads
    heads.clear
    assert_equal "status 404", fetch(url("/status/404"), on_head: proc { |h| heads << h.status }).body
    assert_equal [404], heads
  end

  def test_on_head_arrives_while_the_server_holds_the_body
    queue = new_queue
    head = nil
    response = nil
    queue.add(url("/hold?key=rb-head&n=3000&id=rb-head"), on_head: proc { |h| head = h }) { |r| response = r }
    dispatch_until(queue) { head }
    assert_nil response
    assert_nil logged("rb-head").first["end"]
    Fixture.get_json("/_/release?key=rb-head")
    queue.run
    assert_equal 200, head.status
    assert_equal pattern(3000), response.body
  end

  def test_an_exception_in_on_body_cancels_the_request
    queue = new_queue
    response = nil
    calls = 0
    queue.add(url("/bytes?n=2000000&rate=4000000"), on_body: proc { calls += 1; raise IOError, "disk full" }) { |r| response = r }
    error = assert_raises(IOError) { queue.run }
    assert_equal "disk full", error.message
    queue.run
    assert response.cancelled?
    assert_equal 1, calls, "no piece is delivered after the one that raised"
  end

  def test_output_file_receives_the_body
    Dir.mktmpdir do |dir|
      path = File.join(dir, "out.bin")
      response = fetch(url("/bytes?n=100000"), output_file: path)
      assert response.ok?
      assert_equal "", response.body
      assert_equal pattern(100_000), File.binread(path)

      missing = fetch(url("/status/404"), output_file: File.join(dir, "never.bin"))
      assert_equal 404, missing.status
      refute File.exist?(File.join(dir, "never.bin")), "an error status leaves no file"

      bad = fetch(url("/bytes?n=10"), output_file: File.join(dir, "no/such/dir/x.bin"))
      assert_equal :file_error, bad.outcome
      assert_instance_of RequestQueue::FileError, bad.error
      assert_includes bad.error_message, "no/such/dir/x.bin"
    end
  end

  def test_output_file_resume_sends_a_range
    Dir.mktmpdir do |dir|
      path = File.join(dir, "part.bin")
      File.binwrite(path, pattern(1000))
      response = fetch(url("/bytes?n=5000&id=resume"), output_file: path, resume: true)
      assert response.ok?
      assert_equal "bytes=1000-", logged("resume").first["headers"]["range"]
      # The fixture ignores ranges and answers 200 with the whole body: the file is rewritten.
      assert_equal pattern(5000), File.binread(path)
    end
    assert_raises(ArgumentError) { RequestQueue::Request.new(url("/"), resume: true) }
  end

  def test_on_body_and_output_file_are_exclusive
    queue = new_queue
    request = RequestQueue::Request.new(url("/"), output_file: "/tmp/x.bin").on_body { nil }
    assert_raises(RequestQueue::InvalidStateError) { queue << request }
    assert_equal 0, queue.count
  end

  def test_metrics_count_wire_and_header_bytes
    queue = new_queue
    responses = {}
    %w[/bytes?n=1234 /bytes?n=1234&chunked=1 /redirect/0 /redirect/2].each do |path|
      queue.add(url(path)) { |r| responses[path] = r }
    end
    assert queue.run
    # No coding decoded: the bytes on the wire are the body delivered (chunked framing not counted).
    %w[/bytes?n=1234 /bytes?n=1234&chunked=1].each do |path|
      m = responses[path].metrics
      assert_equal [1234, 1234], [m.bytes_down, m.wire_bytes_down], path
    end
    direct = responses["/redirect/0"]
    lines = direct.header_pairs.sum { |name, value| name.bytesize + value.bytesize + 4 } # "name: value\r\n"
    assert_operator direct.metrics.header_bytes_down, :>=, lines + "HTTP/1.1 200 \r\n\r\n".bytesize
    assert_operator direct.metrics.header_bytes_down, :<, lines + 100
    # The headers of the redirects followed count too.
    assert_operator responses["/redirect/2"].metrics.header_bytes_down, :>, 2 * direct.metrics.header_bytes_down
  end

  def test_metrics
    queue = new_queue(max_concurrent: 1)
    responses = []
    2.times { |i| queue.add(url("/bytes?n=1000&i=#{i}")) { |r| responses << r } }
    assert queue.run
    first, second = responses.map(&:metrics)
    assert_instance_of RequestQueue::Response::Metrics, first
    [first, second].each do |m|
      assert_equal 1, m.attempts
      assert_equal 1000, m.bytes_down
      assert_equal 0, m.bytes_up
      assert_nil m.tls, "plain http has no TLS step"
      assert_operator m.queued, :>=, 0
      assert_operator m.connect, :<=, m.first_byte
      assert_operator m.first_byte, :<=, m.total
    end
    refute first.connection_reused
    assert second.connection_reused, "the second request reuses the first one's connection"

    cancelled = nil
    queue.suspend
    queue.add(url("/bytes?n=1")) { |r| cancelled = r }.cancel
    queue.run
    assert_equal 0, cancelled.metrics.attempts
    assert_nil cancelled.metrics.total
  end
end
