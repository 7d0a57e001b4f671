# frozen_string_literal: true

module RequestQueue
  # Version of this gem. It follows the C library it binds (librequestqueue).
  VERSION = "0.1.0"
  # The library's major version this gem was written against (RQ_VERSION_MAJOR).
  LIBRARY_MAJOR = 0
end
