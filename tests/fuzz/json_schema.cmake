# JSON-schema compiler (engine/grammar/json_schema): a request's response_format schema and a
# tool's parameters are outside input. Seeds are schemas of each supported keyword and refused ones.
tandem_add_fuzz(json_schema LIBS tandem_grammar nlohmann_json::nlohmann_json)
