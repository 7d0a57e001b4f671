# frozen_string_literal: true

require_relative "test_helper"
require "tempfile"

# What Ruby HTTP users type without thinking: headers as a case-insensitive Hash, code, json,
# nested and multipart form bodies, IO bodies, and #run under a Fiber scheduler (the async gem).
class TestConventions < Minitest::Test
  include RequestQueueTestHelpers

  def fetch(target, **options)
    queue = new_queue
    request = queue.add(target, **options)
    queue.run
    request.response
  end

  def test_headers_are_a_case_insensitive_hash_with_repeats_joined
    response = fetch(url("/bytes?n=3&header=X-Rep:one&header=X-Rep:two&header=X-Case:Yes"))
    assert_kind_of Hash, response.headers
    assert_equal "one, two", response.headers["x-rep"]
    assert_equal "Yes", response.headers["X-CASE"]
    assert_equal "Yes", response.headers.fetch("x-case")
    assert response.headers.key?("CONTENT-LENGTH")
    assert_equal [%w[X-Rep one], %w[X-Rep two]], response.header_pairs.select { |n, _| n == "X-Rep" }
    assert_equal "one", response["x-rep"] # the first header of that name
    assert_equal 200, response.code
  end

  def test_json_helper
    response = fetch(url("/echo"), method: :post, body: '{"a":[1,2]}')
    assert_equal "POST", response.json["method"]
    assert_equal '{"a":[1,2]}', response.json(symbolize_names: true)[:body]
  end

  def test_nested_hash_body_and_params_are_encoded_as_faraday_does
    echo = fetch(url("/echo"), method: :post, params: { q: { x: 1 } },
                               body: { user: { name: "a b", roles: %w[x y] }, empty: nil }).json
    assert_equal "/echo?q%5Bx%5D=1", echo["path"]
    assert_equal "user%5Bname%5D=a+b&user%5Broles%5D%5B%5D=x&user%5Broles%5D%5B%5D=y&empty", echo["body"]
    assert_equal "application/x-www-form-urlencoded", echo["headers"]["content-type"]
    assert_equal "user[name]=a b&user[roles][]=x&user[roles][]=y&empty",
                 URI.decode_www_form_component(echo["body"])
  end

  def test_multipart_body_with_a_file
    Tempfile.create(["report", ".csv"]) do |file|
      file.write("a,b\n1,2\n")
      file.rewind
      echo = fetch(url("/echo"), method: :post, body: { title: "T", doc: { file: file } }).json
      type = echo["headers"]["content-type"]
      assert_match %r{\Amultipart/form-data; boundary=}, type
      boundary = type.split("boundary=", 2)[1]
      expected = "--#{boundary}\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nT\r\n" \
                 "--#{boundary}\r\nContent-Disposition: form-data; name=\"doc[file]\"; " \
                 "filename=\"#{File.basename(file.path)}\"\r\nContent-Type: application/octet-stream\r\n" \
                 "Content-Transfer-Encoding: binary\r\n\r\na,b\n1,2\n\r\n--#{boundary}--\r\n"
      assert_equal expected, echo["body"]
    end
  end

  def test_io_body_is_sent_whole
    echo = fetch(url("/echo"), method: :put, body: StringIO.new("from an IO")).json
    assert_equal "from an IO", echo["body"]
    assert_equal "10", echo["headers"]["content-length"]
  end

  def test_run_lets_other_fibers_run_under_the_async_scheduler
    begin
      require "async"
    rescue LoadError
      skip "the async gem is not installed (scripts/test-ruby installs ruby-async)"
    end
    skip "no Fiber scheduler in this Ruby" unless Fiber.respond_to?(:scheduler)
    events = []
    Async do |task|
      slow = task.async do
        queue = new_queue
        queue.add(url("/delay?s=0.5&id=fiber")) { |r| events << [:response, r.status] }
        queue.run
      end
      ticker = task.async do
        3.times do |i|
          events << [:tick, i]
          task.sleep 0.01
        end
      end
      [slow, ticker].each(&:wait)
    end
    # The ticker ran while the queue waited for the response: its ticks come first.
    assert_equal [[:tick, 0], [:tick, 1], [:tick, 2], [:response, 200]], events
  end

  def test_two_fibers_run_one_queue_under_the_async_scheduler
    begin
      require "async"
    rescue LoadError
      skip "the async gem is not installed (scripts/test-ruby installs ruby-async)"
    end
    statuses = []
    errors = []
    queue = new_queue
    Async do |task|
      queue.add(url("/bytes?n=1&delay=0.2&id=two")) { |r| statuses << r.status }
      queue.add(url("/bytes?n=2&delay=0.3&id=two")) { |r| statuses << r.status }
      # (A scheduler takes one waiter per IO: the second fiber must not wait on the same descriptor.)
      Array.new(2) do
        task.async do
          queue.run
        rescue StandardError => e
          errors << e
        end
      end.each(&:wait)
    end
    assert_empty errors
    assert_equal [200, 200], statuses
    assert queue.idle?
  end
end
