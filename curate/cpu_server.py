"""A small OpenAI-compatible HTTP server over a transformers causal LM, for machines without a GPU.

Run by datatrove's `CustomServer` hook (`python cpu_server.py --port N --model PATH ...`), it serves
`GET /v1/models`, `POST /v1/chat/completions` and `POST /v1/completions` on 127.0.0.1. It is standard library
HTTP (no web framework to install) and generates one request at a time under a lock: on a CPU, a batch of
requests is not faster than the same requests in turn for the small models this is meant for.

The server exits when the process that started it dies (`exit_with_parent`): started by datatrove with
`asyncio.create_subprocess_exec`, it stayed (~400 MB) after a SIGKILL or SIGTERM of `mathmix run`.

Errors follow what datatrove's client does with them: 400 (bad JSON, prompt too long) is final for that
request; 503 (generation failed) is worth a retry; the server never answers 500, which would stop the run.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

READY_MESSAGE = "Application startup complete"  # datatrove's CustomServer watches for this line


class ServeError(RuntimeError):
    """The server cannot start: the port is taken, or the model cannot be loaded."""


class BadRequest(ValueError):
    """The request cannot succeed as sent (answered with 400)."""


class CausalLMService:
    """Loads a transformers causal LM once and turns OpenAI-style requests into generations."""

    def __init__(
        self, model_path: str, dtype: str = "float32", threads: int | None = None, max_context: int = 0
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        self.model_name = model_path
        from mathmix.hub import from_pretrained

        self.tokenizer = from_pretrained(AutoTokenizer, model_path)
        self.model = from_pretrained(AutoModelForCausalLM, model_path, dtype=getattr(torch, dtype))
        self.model.eval()
        config_ctx = getattr(self.model.config, "max_position_embeddings", 2048)
        self.max_context = min(max_context, config_ctx) if max_context else config_ctx
        self.lock = threading.Lock()

    def prompt_ids(self, body: dict[str, Any], chat: bool) -> list[int]:
        """Token ids of the prompt (chat template applied for chat requests)."""
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise BadRequest("'messages' must be a non-empty list")
            if not self.tokenizer.chat_template:
                raise BadRequest("this model's tokenizer has no chat template: use /v1/completions")
            ids: Any = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # some versions return a BatchEncoding
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise BadRequest("'prompt' must be a string")
        return self.tokenizer(prompt)["input_ids"]

    def generate(self, body: dict[str, Any], chat: bool) -> dict[str, Any]:
        """Answer one request in the OpenAI response format."""
        ids = self.prompt_ids(body, chat)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
        if max_tokens < 1:
            raise BadRequest("max_tokens must be >= 1")
        if len(ids) + max_tokens > self.max_context:
            raise BadRequest(
                f"prompt ({len(ids)} tokens) + max_tokens ({max_tokens}) exceeds the context ({self.max_context})"
            )
        temperature = float(body.get("temperature", 1.0))
        kwargs: dict[str, Any] = {"max_new_tokens": max_tokens, "do_sample": temperature > 0}
        if temperature > 0:
            kwargs.update(temperature=temperature, top_p=float(body.get("top_p", 1.0)))
        torch = self.torch
        with self.lock:
            if body.get("seed") is not None:
                torch.manual_seed(int(body["seed"]))
            with torch.no_grad():
                out = self.model.generate(
                    torch.tensor([ids]),
                    attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                    pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                    **kwargs,
                )
        new = out[0, len(ids) :].tolist()
        finish = "length"
        eos = self.tokenizer.eos_token_id
        if eos is not None and eos in new:
            new, finish = new[: new.index(eos)], "stop"
        text = str(self.tokenizer.decode(new, skip_special_tokens=True))
        text, stopped = _apply_stop(text, body.get("stop"))
        if stopped:
            finish = "stop"
        usage = {
            "prompt_tokens": len(ids),
            "completion_tokens": len(new),
            "total_tokens": len(ids) + len(new),
        }
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return {
            "id": f"cmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model_name,
            "choices": [choice],
            "usage": usage,
        }


def _apply_stop(text: str, stop: Any) -> tuple[str, bool]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    cut = min((text.find(s) for s in stops if s and s in text), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def make_handler(service: CausalLMService) -> type[BaseHTTPRequestHandler]:
    """An HTTP handler class bound to `service`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.rstrip("/") in ("/v1/models", "/health"):
                self._send(200, {"object": "list", "data": [{"id": service.model_name, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802
            routes = {"/v1/chat/completions": True, "/v1/completions": False}
            path = self.path.rstrip("/")
            if path not in routes:
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                if not isinstance(body, dict):
                    raise BadRequest("the request body must be a JSON object")
                self._send(200, service.generate(body, chat=routes[path]))
            except (BadRequest, json.JSONDecodeError, UnicodeDecodeError, ValueError, TypeError) as err:
                self._send(400, {"error": {"type": "BadRequestError", "message": str(err)}})
            except Exception as err:  # generation failed: worth a retry, must not stop the whole run
                self._send(
                    503, {"error": {"type": "ServiceUnavailable", "message": f"{type(err).__name__}: {err}"}}
                )

        def log_message(self, format: str, *args: Any) -> None:  # one line per request on stderr
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

    return Handler


def serve(
    model: str,
    port: int,
    host: str = "127.0.0.1",
    dtype: str = "float32",
    threads: int = 0,
    max_context: int = 0,
) -> None:
    """Load `model` and serve it until killed.

    The port is taken before the model loads, so a port in use fails at once; either failure is a ServeError
    naming the port or the model (one line, no traceback, in `mathmix rewrite serve`).
    """
    # Bound now, listening once the model is loaded: until then a readiness check is refused at once (not left
    # waiting in a backlog), and the handler can be bound to the loaded model.
    server = ThreadingHTTPServer((host, port), BaseHTTPRequestHandler, bind_and_activate=False)
    try:
        try:
            server.server_bind()
        except OSError as err:
            raise ServeError(f"cannot listen on {host}:{port}: {err.strerror or err}") from err
        try:
            service = CausalLMService(model, dtype=dtype, threads=threads or None, max_context=max_context)
        except (OSError, ValueError) as err:
            message = " ".join(str(err).split())  # transformers' messages run over several lines
            raise ServeError(f"cannot load the model {model}: {message}") from err
        server.RequestHandlerClass = make_handler(service)
        try:
            server.server_activate()
        except OSError as err:
            raise ServeError(f"cannot listen on {host}:{port}: {err.strerror or err}") from err
    except BaseException:
        server.server_close()
        raise
    print(f"Uvicorn running on http://{host}:{port} (mathmix cpu_server, model {model})", flush=True)
    print(READY_MESSAGE, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def exit_with_parent(poll_s: float = 0.5) -> threading.Thread:
    """Watch this process's parent from a daemon thread and exit (os._exit) once it is gone (this process is
    reparented), within POLL_S. A thread, not PR_SET_PDEATHSIG alone: that signal follows the parent's *thread*
    that started this process, and comes from the kernel only where the starter asked before exec."""
    import os

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        sys.stderr.write(f"cpu_server: the process that started it ({parent}) is gone; exiting\n")
        os._exit(0)

    if parent == 1:  # the starter died before this line: reparented to init already
        os._exit(0)
    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> None:
    """datatrove's `CustomServer` entry (`python cpu_server.py --port N ...`): exits with its starter. A server of
    one's own, which should outlive the shell that started it, is `mathmix rewrite serve`."""
    parser = argparse.ArgumentParser(
        description="OpenAI-compatible server over a transformers causal LM (CPU)."
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True, help="local Hugging Face model folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--max-context", type=int, default=0, help="cap on prompt + completion tokens")
    args = parser.parse_args(argv)  # --help and a bad option answer whoever started it
    exit_with_parent()  # before the model loads (seconds), and the starter may die meanwhile
    serve(args.model, args.port, args.host, args.dtype, args.threads, args.max_context)


if __name__ == "__main__":
    main()
