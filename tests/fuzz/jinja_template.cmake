# Chat-template parser and interpreter (engine/tokenizer/jinja): templates come with model files;
# seeds are small templates using every construct.
tandem_add_fuzz(jinja_template LIBS tandem_jinja MAX_LEN 4096)
