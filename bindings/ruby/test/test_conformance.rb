# frozen_string_literal: true

require_relative "test_helper"
require "base64"

# HTTP conformance through the binding (the C side is Tests/c/test_conformance.c): removing a
# default header with nil, repeated and folded response headers, redirect methods, and no silent
# resending of a POST on a kept connection.
class TestConformance < Minitest::Test
  def run_one(queue, target, **options)
    response = nil
    queue.add(target, **options) { |r| response = r }
    assert queue.run
    response
  end

  def sent_headers(response)
    response.json["headers"].to_h { |name, value| [name.downcase, value] }
  end

  def test_nil_removes_a_header_the_library_would_send
    queue = new_queue
    assert_operator sent_headers(run_one(queue, url("/inspect"))).keys, :include?, "accept"
    removed = sent_headers(run_one(queue, url("/inspect"), headers: { "Accept" => nil, "User-Agent" => nil }))
    refute removed.key?("accept")
    refute removed.key?("user-agent")
  end

  def test_repeated_and_folded_headers
    raw = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nX-Folded: one\r\n two\r\n\r\n"
    response = run_one(new_queue, url("/raw?b64=#{Base64.urlsafe_encode64(raw, padding: false)}"))
    assert_equal "a=1", response["SET-COOKIE"]
    assert_equal [%w[Set-Cookie a=1], %w[set-cookie b=2]], response.header_pairs.select { |n, _| n.casecmp?("set-cookie") }
    assert_equal "one two", response["x-folded"]
  end

  def test_redirect_methods
    queue = new_queue
    [["POST", 302, "GET", ""], ["POST", 307, "POST", "data"], ["PUT", 302, "PUT", "data"]].each do |method, status, seen, body|
      response = run_one(queue, url("/redirect-to?status=#{status}&url=/inspect"), method: method, body: "data")
      assert_equal [seen, body], [response.json["method"], response.json["body"]], "#{method} then #{status}"
    end
    response = run_one(queue, url("/redirect-to?status=303&url=/inspect"), method: "DELETE")
    assert_equal 303, response.status
  end

  def test_a_post_is_not_sent_twice_unasked
    queue = new_queue(max_concurrent: 1)
    run_one(queue, url("/bytes?n=1")) # a kept connection, which /drop then closes unanswered
    response = run_one(queue, url("/drop?key=rb&n=1"), method: "POST", body: "order")
    assert_equal :connection_lost, response.outcome
    assert_equal 1, Fixture.log["requests"].count { |e| e["path"].start_with?("/drop?key=rb") }
  end
end
