# frozen_string_literal: true

require_relative "test_helper"

# Progress and authentication blocks.
class TestCallbacks < Minitest::Test
  def run_one(target, **options)
    queue = new_queue
    response = nil
    queue.add(target, **options) { |r| response = r }
    assert queue.run
    response
  end

  def assert_monotonic(calls)
    calls.each_cons(2) do |(f1, d1, _), (f2, d2, _)|
      assert_operator d1, :<=, d2
      assert_operator f1, :<=, f2 if f1 && f2
    end
  end

  def test_download_progress_with_a_known_length
    calls = []
    response = run_one(url("/bytes?n=300000"), on_download_progress: proc { |*args| calls << args })
    assert_equal 300_000, response.body.bytesize
    refute_empty calls
    assert_equal [1.0, 300_000, 300_000], calls.last
    calls.each do |fraction, done, total|
      assert_equal 300_000, total if total
      assert fraction.between?(0.0, 1.0) if fraction
      assert_operator done, :<=, 300_000
    end
    assert_monotonic(calls)
  end

  def test_download_progress_with_an_unknown_length_is_indeterminate
    calls = []
    request = RequestQueue::Request.new(url("/bytes?n=20000&chunked=1&chunk=1000&rate=100000"))
    request.on_download_progress { |fraction, done, total| calls << [fraction, done, total] }
    new_queue.tap { |q| q << request }.run
    assert request.response.ok?
    assert_equal [1.0, 20_000, 20_000], calls.last
    before_end = calls[0...-1].reject { |_, done, _| done == 20_000 }
    refute_empty before_end, "a paced chunked body reports progress before its end"
    before_end.each do |fraction, _done, total|
      assert_nil fraction
      assert_nil total
    end
    assert_monotonic(calls)
  end

  def test_upload_progress
    body = "x" * 1_000_000
    calls = []
    response = run_one(url("/upload"), method: :post, body: body,
                                       on_upload_progress: ->(fraction, done, total) { calls << [fraction, done, total] })
    assert_equal({ "received" => 1_000_000 }, JSON.parse(response.body))
    assert_equal [1.0, 1_000_000, 1_000_000], calls.last
    assert_monotonic(calls)
  end

  def test_a_failed_transfer_ends_with_a_final_progress_call
    calls = []
    response = run_one(url("/reset"), on_download_progress: proc { |*args| calls << args })
    assert_equal :connection_lost, response.outcome
    refute_empty calls
    refute_equal 1.0, calls.last[0]
  end

  def test_auth_retries_with_credentials_and_reports_failures
    seen = []
    response = run_one(url("/basic-auth/user/secret?id=auth"), on_auth: proc { |challenge|
      seen << [challenge.failure_count, challenge.response.status, challenge.realm]
      if challenge.failure_count.zero?
        challenge.use_credential("user", "wrong")
      else
        challenge.use_credential("user", "secret")
      end
    })
    assert_equal [[0, 401, "fixture"], [1, 401, "fixture"]], seen
    assert_equal 200, response.status
    assert_equal({ "authenticated" => true, "user" => "user" }, JSON.parse(response.body))
    authorizations = logged("auth").map { |e| e["headers"]["authorization"] }
    assert_equal [nil, "Basic #{["user:wrong"].pack("m0")}", "Basic #{["user:secret"].pack("m0")}"], authorizations
  end

  def test_auth_continue_without_gives_the_401
    response = run_one(url("/basic-auth/u/p"), on_auth: proc { |c| c.continue_without })
    assert_equal 401, response.status
    assert_instance_of RequestQueue::HTTPStatusError, response.error
    assert_equal "unauthorized", response.error.response.body
  end

  def test_auth_cancel
    response = run_one(url("/basic-auth/u/p"), on_auth: proc { |c| c.cancel })
    assert response.cancelled?
  end

  def test_without_an_auth_block_a_401_is_an_http_status_error
    response = run_one(url("/basic-auth/u/p"))
    assert_equal :http_status, response.outcome
    assert_equal 401, response.error.status
  end

  def test_a_challenge_answered_later_from_another_thread
    queue = new_queue
    challenges = []
    response = nil
    queue.add(url("/basic-auth/u/p"), on_auth: proc { |c| challenges << c }) { |r| response = r }
    dispatch_until(queue) { challenges.any? }
    challenge = challenges.first
    refute challenge.answered?
    assert_equal :running, challenge.request.state
    Thread.new { challenge.use_credential("u", "p") }.join
    assert challenge.answered?
    assert_raises(RequestQueue::InvalidStateError) { challenge.cancel }
    assert queue.run
    assert_equal 200, response.status
  end

  class AuthBoom < StandardError; end

  def test_an_auth_block_that_raises_cancels_the_request
    queue = new_queue
    response = nil
    queue.add(url("/basic-auth/u/p"), on_auth: proc { raise AuthBoom }) { |r| response = r }
    assert_raises(AuthBoom) { queue.run }
    assert queue.run
    assert response.cancelled?
  end

  def test_each_exception_of_a_block_is_raised_once_and_the_request_completes
    queue = new_queue
    response = nil
    calls = 0
    queue.add(url("/bytes?n=10"), on_download_progress: proc { raise ArgumentError, "progress #{calls += 1}" }) { |r| response = r }
    messages = []
    begin
      queue.run
    rescue ArgumentError => e
      messages << e.message
      retry
    end
    assert_operator calls, :>=, 1
    assert_equal (1..calls).map { |i| "progress #{i}" }, messages
    assert response.ok?
  end
end
