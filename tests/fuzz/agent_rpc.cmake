# The agent's gRPC request handlers (Agent + AgentControl) behind a real in-process gRPC server
# with token auth, against a fake node tree and a tiny model in a temp dir. Seeds: sequences of
# calls written by make_agent_rpc_corpus.py. Fewer replay mutations than the parsers: an input
# that loads the model and forms a group takes tens of milliseconds under ASan.
tandem_add_fuzz(agent_rpc LIBS tandem_agent tandem_infer tandem_test_fake_node MAX_LEN 2048
                REPLAY_MUTATIONS 40)
