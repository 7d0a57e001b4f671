# frozen_string_literal: true

require_relative "test_helper"
require "fileutils"
require "tmpdir"

# The raw layer: the attach_function table against the header, result codes, library lookup.
class TestNative < Minitest::Test
  HEADER = File.join(Fixture::ROOT, "include/requestqueue.h")

  def header_functions
    File.read(HEADER).scan(/^RQ_API\s+[^;(]*?\**\s*\b(rq_\w+)\s*\(/).flatten.map(&:to_sym)
  end

  def test_every_function_of_the_header_is_attached_once
    declared = header_functions
    refute_empty declared
    table = RequestQueue::Native::FUNCTIONS.map(&:first)
    assert_equal table.uniq, table, "a function is listed twice"
    assert_equal declared.sort, table.sort
    declared.each { |name| assert_respond_to RequestQueue::Native, name }
  end

  # The fields of a struct of the header, in order, comments left out: [[name, C type], ...].
  def header_struct(name)
    body = File.read(HEADER)[/typedef struct #{name} \{(.*?)\} #{name};/m, 1]
    refute_nil body, "struct #{name} not found in the header"
    body.gsub(%r{/\*.*?\*/}m, "").scan(/^\s*([\w ]+?)\s+(\w+);/).map { |type, field| [field.to_sym, type] }
  end

  def test_every_struct_layout_has_the_fields_of_the_header
    ffi_types = { "size_t" => :size_t, "double" => :double, "uint64_t" => :uint64, "unsigned" => :uint, "int" => :int }
    { "rq_metrics" => RequestQueue::Native::Metrics, "rq_queue_stats" => RequestQueue::Native::QueueStats }.each do |name, struct|
      fields = header_struct(name)
      assert_equal fields.map(&:first), struct.members, name
      layout = struct.new.layout # (the class's `layout` without arguments warns of a redefinition)
      fields.each do |field, type|
        assert_equal FFI.find_type(ffi_types.fetch(type)), layout[field].type, "#{name}.#{field}"
      end
    end
  end

  def test_waiting_calls_are_attached_blocking
    assert_equal %i[rq_queue_dispatch rq_queue_free rq_queue_wait_idle], RequestQueue::Native::BLOCKING.sort
  end

  def test_library_version_matches_its_packed_number
    number = RequestQueue::Native.rq_version_number
    major, minor, patch = RequestQueue.library_version.split(".").map(&:to_i)
    assert_equal major * 10_000 + minor * 100 + patch, number
    assert_equal RequestQueue::LIBRARY_MAJOR, major
  end

  def test_every_result_code_maps_to_its_own_exception_class
    classes = (1..17).map { |code| RequestQueue::RESULT_ERRORS.fetch(code) }
    assert_equal 17, classes.uniq.size # the header's codes are checked by the test above
    classes.each_with_index do |klass, i|
      code = i + 1
      assert_operator klass, :<, RequestQueue::CallError
      assert_equal code, klass::CODE
      error = assert_raises(klass) { RequestQueue.check(code, "doing it") }
      assert_equal code, error.code
      assert error.message.start_with?("doing it: #{RequestQueue::Native.rq_result_str(code)}"), error.message
      assert_equal RequestQueue::Native::RESULT_NAMES[code], error.result_name
    end
    assert_equal RequestQueue::InvalidURLError, RequestQueue::RESULT_ERRORS[4]
    assert_operator RequestQueue::InvalidURLError, :<, RequestQueue::InvalidArgumentError
    assert_equal RequestQueue::WouldDeadlockError, RequestQueue::RESULT_ERRORS[15]
    assert_equal 0, RequestQueue.check(0)
    unknown = assert_raises(RequestQueue::CallError) { RequestQueue.check(99) }
    assert_equal 99, unknown.code
    assert unknown.message.start_with?("unknown result code"), unknown.message
  end

  def header_enum(prefix)
    File.read(HEADER).scan(/^\s+#{prefix}(\w+) = (\d+)/).map { |name, value| [value.to_i, name.downcase.to_sym] }
  end

  def test_priorities_match_the_header
    levels = File.read(HEADER).scan(/^\s+RQ_PRIORITY_(\w+) = (-?\d+)/).to_h { |name, value| [name.downcase.to_sym, value.to_i] }
    assert_equal levels, RequestQueue::Native::PRIORITIES
  end

  def test_system_library_name_is_the_headers_major
    major = File.read(HEADER)[/^#define RQ_VERSION_MAJOR (\d+)$/, 1]
    assert_equal "librequestqueue.so.#{major}", RequestQueue::Native::SYSTEM_NAME
  end

  def test_result_and_outcome_names_match_the_header
    results = header_enum("RQ_ERR_")
    assert_equal (1..results.size).to_a, results.map(&:first)
    assert_equal RequestQueue::Native::RESULT_NAMES.drop(1), results.map(&:last)
    assert_equal results.size, RequestQueue::RESULT_ERRORS.size
    outcomes = header_enum("RQ_OUTCOME_")
    assert_equal (0...outcomes.size).to_a, outcomes.map(&:first)
    assert_equal RequestQueue::Native::OUTCOMES, outcomes.map(&:last)
  end

  def test_every_outcome_has_an_error_class_and_a_name
    count = RequestQueue::Native::OUTCOMES.size
    RequestQueue::Native::OUTCOMES.each_with_index do |outcome, code|
      refute_equal "unknown outcome", RequestQueue::Native.rq_outcome_str(code)
      next if outcome == :ok

      assert_operator RequestQueue::OUTCOME_ERRORS.fetch(outcome), :<, RequestQueue::RequestError
    end
    assert_equal count - 1, RequestQueue::OUTCOME_ERRORS.values.uniq.size
    assert_equal "unknown outcome", RequestQueue::Native.rq_outcome_str(count)
  end

  def test_raw_layer_runs_a_request
    n = RequestQueue::Native
    out = FFI::MemoryPointer.new(:pointer)
    assert_equal 0, n.rq_queue_new(n::DELIVERY_DISPATCH, out)
    queue = out.read_pointer
    assert_equal 0, n.rq_request_new(url("/bytes?n=5&id=raw"), out)
    request = out.read_pointer
    seen = []
    completion = FFI::Function.new(:void, %i[pointer pointer pointer]) do |_ctx, _req, response|
      seen << [n.rq_response_status(response), n.rq_response_outcome(response)]
    end
    assert_equal 0, n.rq_request_set_completion(request, completion, nil, nil)
    assert_equal 0, n.rq_add(queue, request)
    assert_equal 0, n.rq_request_free(request)
    assert_equal 0, n.rq_queue_wait_idle(queue, -1.0)
    assert_equal [[200, 0]], seen
    assert_equal 0, n.rq_queue_free(queue)
    assert_equal RequestQueue::InvalidHandleError::CODE, n.rq_queue_free(queue)
    assert_equal 1, logged("raw").size
  end

  def test_an_explicit_library_path_that_fails_is_the_only_one_tried
    status, _out, err = run_child("", env: { "REQUESTQUEUE_LIBRARY" => "/nonexistent/librequestqueue.so" })
    refute status.success?
    assert_includes err, "RequestQueue::LibraryNotFound"
    assert_includes err, "REQUESTQUEUE_LIBRARY=/nonexistent/librequestqueue.so"
    refute_includes err, "system loader librequestqueue.so.0"
    refute_includes err, "bundled copy"
  end

  def test_without_a_library_the_error_lists_every_place_tried
    Dir.mktmpdir do |dir|
      FileUtils.cp_r(LIB_DIR, dir)
      FileUtils.rm_rf(File.join(dir, "lib/requestqueue/native"))
      # Only the library is missing: keep the header that gems carry there (the version's source).
      FileUtils.mkdir_p(File.join(dir, "lib/requestqueue/native"))
      FileUtils.cp(RequestQueue::HEADER_PATH, File.join(dir, "lib/requestqueue/native/requestqueue.h"))
      code = "$LOAD_PATH.unshift(#{File.join(dir, "lib").inspect}); require 'requestqueue'"
      env = { "REQUESTQUEUE_LIBRARY" => nil, "LD_LIBRARY_PATH" => nil }
      pid = Process.spawn(env, RbConfig.ruby, "-e", code, err: File.join(dir, "err"), out: File::NULL)
      Process.wait(pid)
      err = File.read(File.join(dir, "err"))
      skip "librequestqueue.so.0 is installed where the system loader finds it" if $?.success?
      assert_includes err, "bundled copy #{dir}/lib/requestqueue/native/librequestqueue.so: not present"
      assert_includes err, "system loader librequestqueue.so.0"
      assert_includes err, "Set REQUESTQUEUE_LIBRARY"
    end
  end
end
