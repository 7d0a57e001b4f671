# frozen_string_literal: true

require "ffi"
require_relative "version"

module RequestQueue
  # Raised when librequestqueue cannot be found or loaded; the message lists every place tried.
  class LibraryNotFound < LoadError; end

  # The raw C API of librequestqueue (include/requestqueue.h), one function per entry of the
  # FUNCTIONS table. Everything here is a thin FFI mapping: results are plain Integers (rq_result),
  # handles are FFI::Pointers. The idiomatic layer (RequestQueue::Queue, Request, Response) is
  # built on it; use this module directly only for what that layer does not offer.
  module Native
    extend FFI::Library

    # Where the library is looked for, in this order:
    # 1. the full path in REQUESTQUEUE_LIBRARY (when set, it is the only candidate: an explicit
    #    choice is never silently replaced by another copy);
    # 2. the copy bundled in the gem (lib/requestqueue/native/librequestqueue.so);
    # 3. the system loader's librequestqueue.so.0 (ld.so.conf, LD_LIBRARY_PATH).
    ENV_VAR = "REQUESTQUEUE_LIBRARY"
    BUNDLED_PATH = File.expand_path("native/librequestqueue.so", __dir__)
    SYSTEM_NAME = "librequestqueue.so.#{LIBRARY_MAJOR}"

    def self.load_library
      tried = []
      explicit = ENV[ENV_VAR]
      candidates =
        if explicit && !explicit.empty?
          [["#{ENV_VAR}=#{explicit}", explicit]]
        else
          list = []
          if File.exist?(BUNDLED_PATH)
            list << ["bundled copy #{BUNDLED_PATH}", BUNDLED_PATH]
          else
            tried << "bundled copy #{BUNDLED_PATH}: not present in this installation"
          end
          list << ["system loader #{SYSTEM_NAME}", SYSTEM_NAME]
        end
      candidates.each do |label, name|
        begin
          ffi_lib name
          @library_path = name
          return name
        rescue LoadError => e
          tried << "#{label}: #{e.message.lines.first.to_s.strip}"
        end
      end
      raise LibraryNotFound,
            "librequestqueue could not be loaded. Tried:\n  " + tried.join("\n  ") +
            "\nSet #{ENV_VAR} to the full path of librequestqueue.so, install a gem that bundles " \
            "it, or install the library where the system loader finds it.",
            cause: nil # (not RubyGems' LoadError of its first attempt, which Ruby would print last)
    end

    class << self
      # The path or name the library was loaded from.
      attr_reader :library_path
    end

    load_library

    # ---- Constants of the header (values are fixed and never renumbered) -------------------------

    RQ_OK = 0
    RESULT_NAMES = %i[
      ok null_argument invalid_handle invalid_argument invalid_url unsupported_scheme
      invalid_method invalid_header already_added request_frozen not_active invalid_state
      wrong_delivery queue_closed timed_out would_deadlock out_of_memory system
    ].freeze

    OUTCOMES = %i[
      ok cancelled http_status timeout cannot_resolve_host cannot_connect connection_lost tls
      too_many_redirects bad_response bad_redirect transport response_too_large file_error
    ].freeze

    DELIVERY_THREADED = 0
    DELIVERY_DISPATCH = 1
    ORDERS = %i[fifo lifo].freeze
    DUPLICATES = %i[cancel_earlier allow coalesce].freeze
    # Priority symbol => rq_priority value.
    PRIORITIES = { very_low: -2, low: -1, normal: 0, high: 1, very_high: 2 }.freeze
    STATES = %i[new waiting running completed].freeze
    PROGRESS_INDETERMINATE = -1.0

    # ---- Callback types ----------------------------------------------------------------------

    callback :rq_completion_fn, %i[pointer pointer pointer], :void
    callback :rq_progress_fn, %i[pointer pointer double int64 int64], :void
    callback :rq_auth_fn, %i[pointer pointer pointer uint pointer], :void
    callback :rq_context_free_fn, %i[pointer], :void
    callback :rq_data_fn, %i[pointer pointer pointer size_t uint64], :int
    callback :rq_head_fn, %i[pointer pointer pointer], :void
    callback :rq_summary_completion_fn, %i[pointer pointer pointer int int int pointer size_t], :void

    # ---- Structs (each starts with its own size, set by the caller) --------------------------

    class QueueStats < FFI::Struct
      layout :size, :size_t,
             :added, :uint64, :started, :uint64, :retried, :uint64,
             :succeeded, :uint64, :cancelled, :uint64, :failed, :uint64,
             :coalesced, :uint64, :bytes_down, :uint64, :bytes_up, :uint64
    end

    # rq_response_summary: the outcome, status, HTTP version, attempts and body of a response, read
    # in one call (rq_response_get_summary) instead of five.
    class Summary < FFI::Struct
      layout :size, :size_t, :outcome, :int, :status, :int, :http_version, :int, :attempts, :uint,
             :body, :pointer, :body_size, :size_t
    end

    class Metrics < FFI::Struct
      layout :size, :size_t,
             :queued, :double, :dns, :double, :connect, :double, :tls, :double,
             :first_byte, :double, :total, :double,
             :bytes_down, :uint64, :bytes_up, :uint64,
             :attempts, :uint, :connection_reused, :int,
             :wire_bytes_down, :uint64, :header_bytes_down, :uint64,
             :http_version, :int
    end

    # ---- The attach_function table ---------------------------------------------------------
    #
    # [name, argument types, return type, blocking]. `blocking: true` releases Ruby's GVL during
    # the call. It is set for every call that can wait: rq_queue_free (joins the queue's threads
    # and runs the last callbacks), rq_queue_wait_idle (waits for the requests) and
    # rq_queue_dispatch (serialized between threads, so it can wait for another thread's
    # dispatch). Attached without it, such a wait holds the GVL: every other Ruby thread stops,
    # a callback that needs the GVL deadlocks, and signals (SIGTERM, Ctrl-C) are never handled.
    # Callbacks invoked during a blocking call take the GVL back on the same thread (ruby-ffi's
    # rb_thread_call_with_gvl); they never run on a foreign thread with the dispatch delivery
    # this gem uses. The other calls only take the library's short internal locks.
    FUNCTIONS = [
      [:rq_version_number, [], :uint, false],
      [:rq_version_string, [], :string, false],
      [:rq_result_str, [:int], :string, false],
      [:rq_last_error_message, [], :string, false],
      [:rq_outcome_str, [:int], :string, false],

      [:rq_queue_new, %i[int pointer], :int, false],
      [:rq_queue_free, [:pointer], :int, true],
      [:rq_queue_default, [], :pointer, false],
      [:rq_queue_set_max_concurrent, %i[pointer size_t], :int, false],
      [:rq_queue_get_max_concurrent, %i[pointer pointer], :int, false],
      [:rq_queue_set_order, %i[pointer int], :int, false],
      [:rq_queue_get_order, %i[pointer pointer], :int, false],
      [:rq_queue_set_duplicates, %i[pointer int], :int, false],
      [:rq_queue_get_duplicates, %i[pointer pointer], :int, false],
      [:rq_queue_set_max_per_host, %i[pointer size_t], :int, false],
      [:rq_queue_get_max_per_host, %i[pointer pointer], :int, false],
      [:rq_queue_set_rate_limit, %i[pointer uint double int], :int, false],
      [:rq_queue_get_stats, %i[pointer pointer], :int, false],
      [:rq_queue_set_context, %i[pointer pointer], :int, false],
      [:rq_queue_get_context, %i[pointer pointer], :int, false],
      [:rq_queue_suspend, [:pointer], :int, false],
      [:rq_queue_resume, [:pointer], :int, false],
      [:rq_queue_is_suspended, %i[pointer pointer], :int, false],
      [:rq_queue_count, %i[pointer pointer], :int, false],
      [:rq_queue_snapshot, %i[pointer pointer pointer], :int, false],
      [:rq_queue_snapshot_tag, %i[pointer string pointer pointer], :int, false],
      [:rq_queue_count_tag, %i[pointer string pointer], :int, false],
      [:rq_queue_cancel_tag, %i[pointer string pointer], :int, false],
      [:rq_snapshot_free, [:pointer], :void, false],
      [:rq_queue_cancel_all, [:pointer], :int, false],
      [:rq_queue_get_fd, %i[pointer pointer], :int, false],
      [:rq_queue_dispatch, %i[pointer size_t pointer], :int, true],
      [:rq_queue_wait_idle, %i[pointer double], :int, true],
      [:rq_add, %i[pointer pointer], :int, false],
      [:rq_cancel, [:pointer], :int, false],

      [:rq_request_new, %i[string pointer], :int, false],
      [:rq_request_free, [:pointer], :int, false],
      [:rq_request_set_method, %i[pointer string], :int, false],
      [:rq_request_set_header, %i[pointer string string], :int, false],
      [:rq_request_set_body, %i[pointer pointer size_t], :int, false],
      [:rq_request_set_body_borrowed, %i[pointer pointer size_t], :int, false],
      [:rq_request_set_timeout, %i[pointer double], :int, false],
      [:rq_request_set_connect_timeout, %i[pointer double], :int, false],
      [:rq_request_set_idle_timeout, %i[pointer double], :int, false],
      [:rq_request_set_header_timeout, %i[pointer double], :int, false],
      [:rq_request_set_low_speed_limit, %i[pointer double double], :int, false],
      [:rq_request_set_credentials, %i[pointer string string], :int, false],
      [:rq_request_set_max_redirects, %i[pointer uint], :int, false],
      [:rq_request_set_max_response_size, %i[pointer uint64], :int, false],
      [:rq_request_set_ca_file, %i[pointer string], :int, false],
      [:rq_request_set_completion, %i[pointer rq_completion_fn pointer rq_context_free_fn], :int, false],
      [:rq_request_set_upload_progress, %i[pointer rq_progress_fn], :int, false],
      [:rq_request_set_download_progress, %i[pointer rq_progress_fn], :int, false],
      [:rq_request_set_auth_handler, %i[pointer rq_auth_fn], :int, false],
      [:rq_request_set_retry, %i[pointer int], :int, false],
      [:rq_request_set_retry_delay, %i[pointer double], :int, false],
      [:rq_request_set_retry_outcomes, %i[pointer pointer size_t], :int, false],
      [:rq_request_set_retry_backoff, %i[pointer double double double], :int, false],
      [:rq_request_set_retry_statuses, %i[pointer pointer size_t], :int, false],
      [:rq_request_set_retry_non_idempotent, %i[pointer int], :int, false],
      [:rq_request_set_max_attempts, %i[pointer uint], :int, false],
      [:rq_request_start, [:pointer], :int, false],
      [:rq_request_set_priority, %i[pointer int], :int, false],
      [:rq_request_get_priority, %i[pointer pointer], :int, false],
      [:rq_request_set_tag, %i[pointer string], :int, false],
      [:rq_request_get_state, %i[pointer pointer], :int, false],
      [:rq_request_get_context, %i[pointer pointer], :int, false],

      [:rq_response_outcome, [:pointer], :int, false],
      [:rq_response_status, [:pointer], :int, false],
      [:rq_response_body, %i[pointer pointer], :pointer, false],
      [:rq_response_header_count, [:pointer], :size_t, false],
      [:rq_response_header_at, %i[pointer size_t pointer pointer], :int, false],
      [:rq_response_header, %i[pointer string], :pointer, false],
      [:rq_response_url, [:pointer], :string, false],
      [:rq_response_error_message, [:pointer], :string, false],
      [:rq_response_attempts, [:pointer], :uint, false],
      [:rq_response_retain, [:pointer], :pointer, false],
      [:rq_response_release, [:pointer], :void, false],
      [:rq_response_metrics, %i[pointer pointer], :int, false],
      [:rq_response_get_summary, %i[pointer pointer], :int, false],

      [:rq_auth_use_credential, %i[pointer string string], :int, false],
      [:rq_auth_continue_without, [:pointer], :int, false],
      [:rq_auth_cancel, [:pointer], :int, false],

      [:rq_request_set_body_callback, %i[pointer rq_data_fn], :int, false],
      [:rq_request_set_head_callback, %i[pointer rq_head_fn], :int, false],
      [:rq_request_set_output_file, %i[pointer string int], :int, false],

      [:rq_request_set_option_string, %i[pointer int string], :int, false],
      [:rq_request_set_option_int, %i[pointer int int64], :int, false],
      [:rq_queue_get_defaults, %i[pointer pointer], :int, false],
      [:rq_queue_set_max_connections, %i[pointer size_t size_t], :int, false],
      [:rq_queue_get_max_connections, %i[pointer pointer pointer], :int, false],
      [:rq_response_http_version, [:pointer], :int, false],
      [:rq_queue_cookies_list, %i[pointer pointer], :int, false],
      [:rq_string_free, [:pointer], :void, false],
      [:rq_queue_cookies_clear, [:pointer], :int, false],
      [:rq_queue_cookies_load, %i[pointer string], :int, false],
      [:rq_queue_cookies_save, %i[pointer string], :int, false],

      [:rq_add_url, %i[pointer string rq_completion_fn pointer rq_context_free_fn pointer], :int, false],
      [:rq_response_retain_summary, %i[pointer pointer], :int, false],
      [:rq_add_url_with_summary, %i[pointer string rq_summary_completion_fn pointer rq_context_free_fn pointer], :int, false],
      [:rq_request_set_summary_completion, %i[pointer rq_summary_completion_fn pointer rq_context_free_fn], :int, false],
      [:rq_response_release_many, %i[pointer size_t], :void, false],
      [:rq_request_free_many, %i[pointer size_t], :int, false],
    ].freeze

    missing = []
    FUNCTIONS.each do |name, args, ret, blocking|
      attach_function name, args, ret, blocking: blocking
    rescue FFI::NotFoundError
      missing << name
    end
    unless missing.empty?
      raise LibraryNotFound,
            "#{library_path} is older than this gem (requestqueue #{VERSION}): it lacks #{missing.join(", ")}"
    end

    # rq_add_url_with_summary and rq_request_set_summary_completion under a second name, for the
    # gem's own use (every request's completion is Callbacks::COMPLETION): the context of a completion
    # is an Integer (the request's key, see Callbacks) passed as an unsigned long, the register a
    # `void *` travels in on every ABI the library builds for (LP64), so that no FFI::Pointer is
    # made per request; the callback is the process-wide FFI::Function, passed as a pointer.
    attach_function :rq_add_url_keyed, :rq_add_url_with_summary, %i[pointer string pointer ulong pointer pointer], :int
    attach_function :rq_request_set_completion_keyed, :rq_request_set_summary_completion,
                    %i[pointer pointer ulong pointer], :int

    # The names of the functions attached with `blocking: true`.
    BLOCKING = FUNCTIONS.select { |f| f[3] }.map(&:first).freeze

    loaded = rq_version_number
    if loaded / 10_000 != LIBRARY_MAJOR
      raise LibraryNotFound,
            "#{library_path} is librequestqueue #{rq_version_string}, but this gem " \
            "(requestqueue #{VERSION}) needs major version #{LIBRARY_MAJOR}"
    end
  end
end
