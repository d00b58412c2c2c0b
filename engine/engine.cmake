# Included by engine/CMakeLists.txt after the subfolders.
#   tandem_engine_core: step plans and the paged KV cache (what every backend builds on)
#   tandem_engine:      Model::Load (backend dispatch), the step driver, generation, rank launching
#   tandem-infer:       the command line (wiring and flags only)
add_library(tandem_engine_core STATIC
  ${CMAKE_CURRENT_LIST_DIR}/step.cc
  ${CMAKE_CURRENT_LIST_DIR}/kv_cache.cc)
target_link_libraries(tandem_engine_core PUBLIC absl::status absl::statusor tandem_engine_model)

add_library(tandem_engine STATIC
  ${CMAKE_CURRENT_LIST_DIR}/model.cc
  ${CMAKE_CURRENT_LIST_DIR}/step_driver.cc
  ${CMAKE_CURRENT_LIST_DIR}/generate.cc)
target_link_libraries(tandem_engine PUBLIC tandem_engine_core tandem_engine_cpu tandem_comm tandem_common)
if(TANDEM_CUDA)
  target_link_libraries(tandem_engine PUBLIC tandem_engine_cuda)  # Model::Load's "cuda" backend
endif()

add_library(tandem_infer STATIC
  ${CMAKE_CURRENT_LIST_DIR}/infer.cc
  ${CMAKE_CURRENT_LIST_DIR}/make_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/rank_processes.cc)
target_link_libraries(tandem_infer PUBLIC tandem_engine tandem_tokenizer nlohmann_json::nlohmann_json)
if(TANDEM_CUDA)
  target_link_libraries(tandem_infer PUBLIC tandem_nccl_comm)  # --backend cuda --ranks processes
endif()

add_executable(tandem-infer ${CMAKE_CURRENT_LIST_DIR}/infer_main.cc)
target_link_libraries(tandem-infer PRIVATE tandem_infer)
