"""Load a policy, build its engine and scheduler, and run the app with uvicorn (in the foreground for
`jaxseeker serve`, or on a background thread for tests and the benchmark)."""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jax.sharding import Mesh

from jaxseeker.generation import Engine
from jaxseeker.serve.app import Served, create_app
from jaxseeker.serve.connections import ConnectionLimits, uvicorn_options
from jaxseeker.serve.scheduler import Scheduler
from jaxseeker.serve.shape import EngineShape

log = logging.getLogger(__name__)


def load_policy(path: str | Path, dtype: str | None = None, mesh: Mesh | None = None) -> tuple[Any, dict, Any]:
    """(cfg, params, tokenizer) of an HF model directory (or a GGUF file or registered name: `model.resolve_model`),
    or of a jaxseeker run directory / its checkpoints folder (latest step; tokenizer from the run's `tokenizer/`),
    on the default device or, with `mesh`, each device holding its slice of the weights."""
    import jax

    from jaxseeker import model
    from jaxseeker.data.tokenizer import load_tokenizer
    from jaxseeker.parallel import MeshConfig, make_mesh, param_shardings

    on_mesh = functools.partial(param_shardings, mesh=mesh or make_mesh(MeshConfig(1, 1, 1, 1), jax.devices()[:1]))
    path = Path(path) if Path(path).is_dir() else model.resolve_model(path)  # a registered name or a GGUF file
    if (path / "config.json").exists():
        cfg, params = model.load_hf(path, dtype=dtype, shardings=on_mesh)
        return cfg, params, load_tokenizer(path)
    from jaxseeker.train.export import restore_run

    run, cfg, params = restore_run(path, dtype=dtype, shardings=on_mesh)  # FileNotFoundError naming a bad path
    return cfg, params, load_tokenizer(run / "tokenizer")


def eos_ids(tokenizer: Any, model_eos: int | tuple[int, ...] | None = None) -> list[int]:
    """Token ids that end a completion: the tokenizer's EOS, `<|im_end|>`, `<|endoftext|>` and the model
    config's `eos_token_id` (one id or several)."""
    vocab = tokenizer.get_vocab()
    ids = {tokenizer.eos_token_id, *(vocab.get(t) for t in ("<|im_end|>", "<|endoftext|>"))}
    ids.update(model_eos if isinstance(model_eos, tuple | list) else [model_eos])
    ids.discard(None)
    return sorted(int(i) for i in ids)


def build_served(
    cfg: Any,
    params: dict,
    tokenizer: Any,
    *,
    model_name: str,
    shape: EngineShape = EngineShape(),
    eos: list[int] | None = None,
    api_key: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
    mesh: Mesh | None = None,
) -> Served:
    """An engine of `shape` over `params` (sharded over `mesh` by their logical axes, when given), its scheduler
    thread started, bundled for `create_app` with the key clients must send and the Host names they may use besides
    this machine's."""
    if shape.max_len > cfg.max_position_embeddings:
        raise ValueError(
            f"max_len={shape.max_len} exceeds the model's max_position_embeddings={cfg.max_position_embeddings}"
        )
    engine = Engine(
        params,
        cfg,
        slots=shape.slots,
        max_len=shape.max_len,
        steps_per_call=shape.steps_per_call,
        prefill_chunk=shape.prefill_chunk,
        mesh=mesh,
        pages=shape.pages,
    )
    eos = eos_ids(tokenizer, cfg.eos_token_id) if eos is None else eos
    scheduler = Scheduler(engine, eos_ids=eos, max_queue=shape.max_queue)
    return Served(scheduler.start(), tokenizer, model_name, shape.max_len, api_key, allowed_hosts)


class Background:
    """The app served by uvicorn on a daemon thread (tests, benchmarks); `close` stops server and scheduler."""

    def __init__(
        self, served: Served, host: str = "127.0.0.1", port: int = 0, limits: ConnectionLimits = ConnectionLimits()
    ):
        import uvicorn

        self.served = served
        self._socket = bind(host, port)
        self.host, self.port = self._socket.getsockname()[:2]
        config = uvicorn.Config(
            create_app(served), log_level="warning", access_log=False, lifespan="off", **uvicorn_options(limits)
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True, name="jaxseeker-serve-http"
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the server did not start on {self.host}:{self.port}")
            time.sleep(0.01)

    @property
    def url(self) -> str:
        """The server's base URL, e.g. http://127.0.0.1:43125."""
        return f"http://{self.host}:{self.port}"

    @property
    def state(self) -> Any:
        """uvicorn's `ServerState`: the open connections and the tasks running the app for a request (what a test
        waits on to know a request has reached the app, or has been dealt with)."""
        return self._server.server_state

    def close(self) -> None:
        """Stop accepting, finish the HTTP thread, then stop the engine thread."""
        self._server.should_exit = True
        self._thread.join(30)
        self._socket.close()
        self.served.scheduler.close()

    def __enter__(self) -> Background:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`host` (an address to bind) as an IP address; None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def loopback(host: str) -> bool:
    """Whether `host` (an address to bind) reaches this machine only: `localhost` or a loopback address."""
    address = host_address(host)
    return host == "localhost" or (address is not None and address.is_loopback)


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port), IPv6 for a host with a colon; port 0: a free one the kernel picks (read
    it back with `getsockname`). OSError (e.g. the address is in use) as bind raises it."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def serve_forever(
    served: Served,
    host: str,
    port: int,
    limits: ConnectionLimits = ConnectionLimits(),
    *,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Run the app in the foreground until interrupted (Ctrl-C), then stop the engine thread. Once the socket
    listens, `on_listening` gets its base URL (with the port the kernel picked for port 0)."""
    import uvicorn

    if not loopback(host):
        log.warning("serve: listening on %s, reachable from other machines", host)
    try:
        sock = bind(host, port)
        with sock:
            port = sock.getsockname()[1]
            config = uvicorn.Config(
                create_app(served), host=host, port=port, log_level="info", **uvicorn_options(limits)
            )
            sock.listen(config.backlog)  # from here a client's connection waits for the server, it is not refused
            if on_listening is not None:
                on_listening(f"http://{f'[{host}]' if ':' in host else host}:{port}")
            server, stopped = uvicorn.Server(config), False
            try:
                server.run(sockets=[sock])
            except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it shut down on: the way to stop it
                stopped = True
            if not (server.started or stopped):
                raise SystemExit(f"jaxseeker serve: the HTTP server did not start on {host}:{port} (its log says why)")
    finally:
        served.scheduler.close()
