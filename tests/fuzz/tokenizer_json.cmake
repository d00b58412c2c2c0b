# tokenizer.json parser (engine/tokenizer): seeds are tiny hand-written tokenizer files.
tandem_add_fuzz(tokenizer_json LIBS tandem_tokenizer)
