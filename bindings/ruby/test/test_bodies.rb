# frozen_string_literal: true

require_relative "test_helper"
require "json"

# Request bodies: a frozen String body (large enough not to be embedded in its object) is read in
# place by the library (rq_request_set_body_borrowed: no copy) and held by the gem until the
# request's completion, also when its queue is dropped with it in flight; any other String is
# copied by the library when the request is made.
class TestBodies < Minitest::Test
  include RequestQueueTestHelpers

  # libc, to find and overwrite a String's own bytes (memchr returns a pointer into them).
  module LibC
    extend FFI::Library
    ffi_lib FFI::Library::LIBC
    attach_function :memchr, %i[pointer int size_t], :pointer
    attach_function :memset, %i[pointer int size_t], :pointer
  end

  def echo(request)
    queue = new_queue
    response = nil
    queue.add(request) { |r| response = r }
    queue.run
    JSON.parse(response.body)
  end

  def test_a_frozen_string_body_is_read_in_place
    body = ("a" * 100_000).freeze
    request = RequestQueue::Request.new(url("/echo"), method: :post, body: body)
    # What the server receives is what the String holds when the request is sent: the library made
    # no copy of its own when the request was made.
    LibC.memset(LibC.memchr(body, "a".ord, 1), "b".ord, body.bytesize)
    GC.compact if GC.respond_to?(:compact) # (its bytes stay where they are)
    json = echo(request)
    assert_equal 100_000, json["body_len"]
    assert_equal "b" * 100_000, json["body"]
  end

  def test_a_string_that_is_not_frozen_is_copied_when_the_request_is_made
    body = +"a" * 100_000
    request = RequestQueue::Request.new(url("/echo"), method: :post, body: body)
    body.replace("z" * 100_000)
    assert_equal "a" * 100_000, echo(request)["body"]
  end

  def test_a_small_frozen_string_is_copied
    body = ("s" * 100).freeze
    request = RequestQueue::Request.new(url("/echo"), method: :post, body: body)
    LibC.memset(LibC.memchr(body, "s".ord, 1), "t".ord, body.bytesize)
    assert_equal "s" * 100, echo(request)["body"]
  end

  def test_the_body_is_held_until_the_completion
    body = ("h" * 5000).freeze
    queue = new_queue
    held = nil
    queue.add(url("/hold?key=rb-body&n=1&id=rb-body"), method: :post, body: body) do |_r|
      held = RequestQueue::Callbacks::HELD_BODIES.values.any? { |b| b.equal?(body) }
    end
    wait_for("the request") { logged("rb-body").any? }
    assert_equal [body], RequestQueue::Callbacks::HELD_BODIES.values.select { |b| b.equal?(body) }
    Fixture.get_json("/_/release?key=rb-body")
    queue.run
    assert_equal false, held, "let go of when the completion runs"
    assert_empty RequestQueue::Callbacks::HELD_BODIES
  end

  def test_a_queue_dropped_with_a_request_in_flight_holds_its_body_until_freed
    body = ("d" * 5000).freeze
    drop = lambda do
      queue = RequestQueue::Queue.new
      queue.add(url("/hold?key=rb-drop&n=1&id=rb-drop"), method: :post, body: body) { nil }
      nil
    end
    # The reaper waits at `gate` (before freeing the queue) until the test opens it.
    gate = Thread::Queue.new
    blocker = Class.new(Thread::Queue) { define_method(:push) { |v| gate.pop && super(v) } }.new
    RequestQueue::Reaper.start
    RequestQueue::Reaper::INBOX.push(blocker)
    drop.call
    begin
      wait_for("the request") { logged("rb-drop").any? }
      4.times { GC.start(full_mark: true, immediate_sweep: true) }
      # Collected with its queue or not, the request still runs: its body is held.
      assert(RequestQueue::Callbacks::HELD_BODIES.values.any? { |b| b.equal?(body) })
      gate.push(true)
      blocker.pop
      wait_for("the reaper to free the queue") do
        GC.start(full_mark: true, immediate_sweep: true)
        RequestQueue::Reaper.wait
        RequestQueue::Callbacks::HELD_BODIES.empty?
      end
    ensure
      gate.push(true)
      Fixture.get_json("/_/release?key=rb-drop")
    end
  end

  def test_a_failed_add_lets_go_of_its_body
    body = ("f" * 5000).freeze
    queue = new_queue
    queue.close
    assert_raises(RequestQueue::QueueClosedError) do
      queue.add(RequestQueue::Request.new(url("/echo"), method: :post, body: body))
    end
    assert_empty RequestQueue::Callbacks::HELD_BODIES
  end
end
