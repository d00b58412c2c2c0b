#!/usr/bin/env python3
"""Writes the seed corpus of the agent_rpc fuzz target (tests/fuzz/agent_rpc_fuzz.cc).

Each seed is a short sequence of calls; each call is framed as
  [method byte][auth byte][request length, 2 bytes little-endian][request bytes]
with the request encoded from protobuf text format by `protoc --encode`. Run from anywhere:
  tests/fuzz/make_agent_rpc_corpus.py        (rewrites tests/fuzz/corpus/agent_rpc/*.bin)
"""
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto" / "tandem" / "v1" / "agent.proto"
OUT = ROOT / "tests" / "fuzz" / "corpus" / "agent_rpc"

# Method byte -> (index in kMethods, request message). Keep in step with kMethods.
METHODS = {
    "GetFacts": (0, "GetFactsRequest"),
    "HashWeights": (1, "HashWeightsRequest"),
    "LoadModel": (2, "LoadModelRequest"),
    "JoinGroup": (3, "JoinGroupRequest"),
    "LeaveGroup": (4, "LeaveGroupRequest"),
    "SetServing": (5, "SetServingRequest"),
    "Generate": (6, "GenerateRequest"),
    "GetStatus": (7, "GetStatusRequest"),
    "StoreSet": (8, "StoreSetRequest"),
    "StoreGet": (9, "StoreGetRequest"),
    "NoSuchMethod": (10, "GetStatusRequest"),
    "Watch": (255, "WatchRequest"),
}
AUTH = {"token": 3, "none": 0, "wrong": 1, "not-bearer": 2}

LOAD = 'model_path: "$ROOT/tiny" backend: "cpu" world_size: 1 threads: 1'
JOIN = 'generation: 7 rank: 0 world_size: 1 timeout_ms: 100 max_num_seqs: 2 max_model_len: 128 kv_tokens: 256'

SEEDS = {
    "facts_with_model": [("GetFacts", "token", 'model_path: "$ROOT/tiny"')],
    "facts_outside_root": [("GetFacts", "token", 'model_path: "/etc"')],
    "facts_no_token": [("GetFacts", "none", "")],
    "hash_model": [("HashWeights", "token", 'model_path: "$ROOT/tiny" threads: 2')],
    "hash_dotdot": [("HashWeights", "token", 'model_path: "$ROOT/../node/proc" ignore_cache: true')],
    "hash_wrong_token": [("HashWeights", "wrong", 'model_path: "$ROOT/tiny"')],
    "load_then_status": [("LoadModel", "token", LOAD), ("GetStatus", "token", "")],
    "load_outside_root": [("LoadModel", "token", 'model_path: "/etc" backend: "cpu"')],
    "load_bad_rank": [("LoadModel", "token", 'model_path: "$ROOT/tiny" rank: 3 world_size: 2')],
    "serve_and_generate": [
        ("LoadModel", "token", LOAD),
        ("JoinGroup", "token", JOIN),
        ("SetServing", "token", "serving: true"),
        ("Generate", "token", "prompt_ids: [1, 2, 3] max_tokens: 4 timeout_ms: 500"),
    ],
    "generate_chat_text": [
        ("LoadModel", "token", LOAD),
        ("JoinGroup", "token", JOIN),
        ("Generate", "token", 'prompt: "hello <|im_end|> h\\303\\251" chat: true max_tokens: 2'),
        ("LeaveGroup", "token", 'unload: true reason: "done"'),
    ],
    "join_without_model": [("JoinGroup", "token", JOIN)],
    # Regressions: each of these killed the agent before it refused them.
    "load_too_many_threads": [("LoadModel", "token", 'model_path: "$ROOT/tiny" threads: 30000')],
    "join_huge_kv": [
        ("LoadModel", "token", LOAD),
        ("JoinGroup", "token", 'generation: 1 rank: 0 world_size: 1 kv_tokens: 1000000000000 max_model_len: 128'),
    ],
    "join_worker": [
        ("LoadModel", "token", 'model_path: "$ROOT/tiny" rank: 1 world_size: 2 threads: 1'),
        ("JoinGroup", "token", 'generation: 3 rank: 1 world_size: 2 store_endpoint: "x:1" timeout_ms: 100'),
    ],
    "store_set_get": [
        ("StoreSet", "token", 'key: "gen1/addr" value: "127.0.0.1:1"'),
        ("StoreGet", "token", 'key: "gen1/addr" timeout_ms: 10'),
        ("StoreGet", "token", 'key: "missing" timeout_ms: 10'),
    ],
    "store_not_bearer": [("StoreSet", "not-bearer", 'key: "k" value: "v"')],
    "leave_idle": [("LeaveGroup", "token", "unload: true")],
    "watch": [("Watch", "token", "interval_ms: 50")],
    "unknown_method": [("NoSuchMethod", "token", "")],
}


def encode(message: str, text: str) -> bytes:
    return subprocess.run(
        ["protoc", f"--encode=tandem.v1.{message}", f"-I{PROTO.parents[2]}", str(PROTO)],
        input=text.encode(), capture_output=True, check=True).stdout


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.bin"):
        old.unlink()
    for name, calls in SEEDS.items():
        data = bytearray()
        for method, auth, text in calls:
            index, message = METHODS[method]
            body = encode(message, text)
            data += bytes([index, AUTH[auth], len(body) & 0xFF, len(body) >> 8]) + body
        (OUT / f"{name}.bin").write_bytes(bytes(data))
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
