# The OpenAI-compatible HTTP layer (included from engine/serve/CMakeLists.txt).
#   tandem_serve_http: request parsing and response shapes (openai_protocol), Prometheus metrics
#                      (serve_metrics), the OpenAI server over an LLMEngine on tandem_http (openai_server)
#   tandem_serve_cli:  `tandem-infer serve` and `tandem-infer bench-serve` as library functions
add_library(tandem_serve_http STATIC
  ${CMAKE_CURRENT_LIST_DIR}/openai_protocol.cc
  ${CMAKE_CURRENT_LIST_DIR}/serve_metrics.cc
  ${CMAKE_CURRENT_LIST_DIR}/openai_server.cc)
# The server only calls LLMEngine's virtual methods; tandem_serve_core (the implementation) is
# linked where it exists so that users of this library get LLMEngine::Create.
target_link_libraries(tandem_serve_http
  PUBLIC absl::status absl::statusor prometheus-cpp::core tandem_tokenizer tandem_common
         $<TARGET_NAME_IF_EXISTS:tandem_serve_core>
  PRIVATE tandem_http nlohmann_json::nlohmann_json)

if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/serve_command.cc)
  add_library(tandem_serve_cli STATIC
    ${CMAKE_CURRENT_LIST_DIR}/serve_command.cc
    ${CMAKE_CURRENT_LIST_DIR}/bench_serve.cc)
  target_link_libraries(tandem_serve_cli
    PUBLIC tandem_serve_http tandem_engine tandem_tokenizer $<TARGET_NAME_IF_EXISTS:tandem_serve_core>
    PRIVATE PkgConfig::HTTPLIB nlohmann_json::nlohmann_json)
endif()

# `tandem-infer serve` / `bench-serve` dispatch to tandem_serve_cli (engine/infer_main.cc).
if(TARGET tandem-infer AND TARGET tandem_serve_cli)
  target_link_libraries(tandem-infer PRIVATE tandem_serve_cli)
endif()
