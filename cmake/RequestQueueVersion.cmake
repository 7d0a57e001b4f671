# Reads the version from include/requestqueue.h, the one place where it is written.
#
#   rq_read_header_version(<header> <out-var>)
#
# Sets <out-var> to "MAJOR.MINOR.PATCH" from RQ_VERSION_MAJOR/MINOR/PATCH and stops with an error
# when RQ_VERSION_STRING or the packed RQ_VERSION_NUMBER formula disagree with them, so that a
# half-edited header cannot be built.
function(rq_read_header_version header out_var)
  file(STRINGS "${header}" lines REGEX "^#define RQ_VERSION_(MAJOR|MINOR|PATCH|NUMBER|STRING) ")
  foreach(part IN ITEMS MAJOR MINOR PATCH)
    if(NOT lines MATCHES "#define RQ_VERSION_${part} ([0-9]+)")
      message(FATAL_ERROR "${header}: no '#define RQ_VERSION_${part} <number>' line")
    endif()
    set(${part} "${CMAKE_MATCH_1}")
  endforeach()
  set(version "${MAJOR}.${MINOR}.${PATCH}")

  if(NOT lines MATCHES "#define RQ_VERSION_STRING \"([^\"]*)\"")
    message(FATAL_ERROR "${header}: no '#define RQ_VERSION_STRING \"...\"' line")
  endif()
  if(NOT CMAKE_MATCH_1 STREQUAL version)
    message(FATAL_ERROR "${header}: RQ_VERSION_STRING is \"${CMAKE_MATCH_1}\" but "
                        "RQ_VERSION_MAJOR/MINOR/PATCH say ${version}")
  endif()

  # The packed number must stay the documented formula of the three parts.
  string(REGEX REPLACE "[ \t]" "" packed "${lines}")
  if(NOT packed MATCHES "#defineRQ_VERSION_NUMBER\\(RQ_VERSION_MAJOR\\*10000\\+RQ_VERSION_MINOR\\*100\\+RQ_VERSION_PATCH\\)")
    message(FATAL_ERROR "${header}: RQ_VERSION_NUMBER is no longer "
                        "(RQ_VERSION_MAJOR * 10000 + RQ_VERSION_MINOR * 100 + RQ_VERSION_PATCH)")
  endif()
  if(MINOR GREATER 99 OR PATCH GREATER 99)
    message(FATAL_ERROR "${header}: minor and patch must stay below 100 to pack into RQ_VERSION_NUMBER")
  endif()

  set(${out_var} "${version}" PARENT_SCOPE)
endfunction()

# Reads the project's home page from the header's opening comment (" * Home page: <url>").
#
#   rq_read_header_homepage(<header> <out-var>)
function(rq_read_header_homepage header out_var)
  file(STRINGS "${header}" lines REGEX "^ \\* Home page: ")
  if(NOT lines MATCHES "Home page: ([^ ;]+)")
    message(FATAL_ERROR "${header}: no ' * Home page: <url>' line in the opening comment")
  endif()
  set(${out_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()
