# The direction of dependency between modules (CONTRIBUTING.md, "Architecture"), checked at
# configure time: a link that crosses it is a configure error, not a review comment.
#
#   prefixgate_forbid_links(prefixgate_gateway prefixgate_engine prefixgate_kernels)
#
# fails when the first target links, directly or through its other dependencies, any of the rest.
function(prefixgate_collect_links target out)
  set(seen "${${out}}")
  get_target_property(aliased ${target} ALIASED_TARGET)
  if(aliased)
    set(target ${aliased})
  endif()
  if(target IN_LIST seen)
    return()
  endif()
  list(APPEND seen ${target})
  get_target_property(type ${target} TYPE)
  set(links "")
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(direct ${target} LINK_LIBRARIES)
    if(direct)
      list(APPEND links ${direct})
    endif()
  endif()
  get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
  if(interface)
    list(APPEND links ${interface})
  endif()
  foreach(link IN LISTS links)
    if(TARGET ${link})
      prefixgate_collect_links(${link} seen)
    endif()
  endforeach()
  set(${out} "${seen}" PARENT_SCOPE)
endfunction()

function(prefixgate_forbid_links target)
  if(NOT TARGET ${target})
    return()
  endif()
  set(reached "")
  prefixgate_collect_links(${target} reached)
  foreach(forbidden IN LISTS ARGN)
    if(forbidden IN_LIST reached)
      message(FATAL_ERROR "${target} must not link ${forbidden} (module boundaries: CONTRIBUTING.md)")
    endif()
  endforeach()
endfunction()

# The gateway and the engine talk HTTP and share only the libraries below them.
prefixgate_forbid_links(prefixgate_gateway prefixgate_engine prefixgate_kernels)
prefixgate_forbid_links(prefixgate_engine prefixgate_gateway)
# The shared core has no I/O, no servers, no CUDA.
prefixgate_forbid_links(prefixgate_canonicalize prefixgate_serving prefixgate_model_folder
  prefixgate_engine prefixgate_gateway prefixgate_kernels)
prefixgate_forbid_links(prefixgate_serving prefixgate_engine prefixgate_gateway)
prefixgate_forbid_links(prefixgate_base prefixgate_canonicalize)
# The KV-event protocol is shared by the engine (publisher) and the gateway (subscriber).
prefixgate_forbid_links(prefixgate_kv_events prefixgate_engine prefixgate_gateway
  prefixgate_serving)
