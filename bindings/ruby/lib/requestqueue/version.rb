# frozen_string_literal: true

module RequestQueue
  # The version is written once, in the C header (include/requestqueue.h): the gem carries a copy
  # beside its library (lib/requestqueue/native/requestqueue.h); a source checkout has the original.
  HEADER_PATH = [File.expand_path("native/requestqueue.h", __dir__),
                 File.expand_path("../../../../include/requestqueue.h", __dir__)].find { |p| File.file?(p) }

  # Version, library major version and home page as "#define RQ_VERSION_STRING", "#define
  # RQ_VERSION_MAJOR" and " * Home page:" give them in +header+ (the text of requestqueue.h).
  def self.header_about(header)
    version = header[/^#define RQ_VERSION_STRING "(\d+\.\d+\.\d+)"$/, 1]
    major = header[/^#define RQ_VERSION_MAJOR (\d+)$/, 1]
    homepage = header[/^ \* Home page: (\S+)$/, 1]
    raise LoadError, "requestqueue: no version or home page in #{HEADER_PATH}" unless version && major && homepage

    [version, Integer(major), homepage]
  end

  if HEADER_PATH
    # Version of this gem: the version of the C library it binds and carries (librequestqueue).
    # The library's major version this gem was written against (RQ_VERSION_MAJOR).
    # The project's home page.
    VERSION, LIBRARY_MAJOR, HOMEPAGE = header_about(File.read(HEADER_PATH))
  elsif (spec = Gem.loaded_specs["requestqueue"])
    # An installed gem built without the header copy: its specification knows the version.
    VERSION = spec.version.to_s
    LIBRARY_MAJOR = Integer(VERSION.split(".").first)
    HOMEPAGE = spec.homepage
  else
    raise LoadError, "requestqueue: requestqueue.h not found beside the library " \
                     "(#{File.expand_path("native", __dir__)}) nor in a source checkout"
  end
end
