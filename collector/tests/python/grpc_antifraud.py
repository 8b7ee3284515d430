"""A stock gRPC client (Python grpcio from PyPI) calls the demo's antifraud service with real
gRPC deadlines (timeout=), as any gRPC caller in another language would.

The messages are demo/proto/antifraud.proto's, encoded by hand (two small messages: no protoc or
grpcio-tools needed). Prints one JSON object with what each call saw; the Rust test judges it.

usage: grpc_antifraud.py HOST:PORT
"""

import json
import sys
import time

import grpc

CHECK = "/budget.demo.Antifraud/Check"


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_check_request(payment_id, amount_cents):
    pid = payment_id.encode()
    # field 1 (string, wire type 2), field 2 (int64, wire type 0)
    return b"\x0a" + varint(len(pid)) + pid + b"\x10" + varint(amount_cents)


def read_varint(data, i):
    n = shift = 0
    while True:
        byte = data[i]
        i += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return n, i


def decode_check_reply(data):
    reply = {"approved": False, "budget_source": "", "budget_ms": 0}
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
            if field == 1:
                reply["approved"] = bool(value)
            elif field == 3:
                # int64: two's complement in 64 bits
                reply["budget_ms"] = value - (1 << 64) if value >= 1 << 63 else value
        elif wire == 2:
            length, i = read_varint(data, i)
            if field == 2:
                reply["budget_source"] = data[i : i + length].decode()
            i += length
        else:
            raise ValueError(f"unexpected wire type {wire}")
    return reply


def call(check, timeout, metadata=None):
    started = time.monotonic()
    try:
        reply = check(
            encode_check_request("py-1", 12000), timeout=timeout, metadata=metadata
        )
        outcome = {"code": "OK", **reply}
    except grpc.RpcError as error:
        outcome = {"code": error.code().name, "details": error.details()}
    outcome["took_ms"] = round((time.monotonic() - started) * 1000)
    return outcome


def main():
    address = sys.argv[1]
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=10)
        check = channel.unary_unary(
            CHECK,
            request_serializer=lambda b: b,
            response_deserializer=decode_check_reply,
        )
        results = {
            # Enough time: antifraud works 250 ms with the budget grpc-timeout brought.
            "enough": call(check, 2.0),
            # Less than antifraud's work: the deadline passes while it works.
            "short": call(check, 0.1),
            # A real 5 s deadline, but the budget is already spent upstream (x-budget-ms is read
            # first): antifraud answers at once, in gRPC's code, long before the 5 s.
            "spent": call(check, 5.0, metadata=(("x-budget-ms", "0"),)),
        }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
