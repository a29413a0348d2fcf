# A TCP proxy between the fleet and the broker that can cut connections mid-flow: both sides are aborted
# (RST, buffered bytes in either direction lost), as a network failure would, so the broker sees the client
# vanish (the will's delay starts) and the device sees its link die and reconnects through the proxy.
import asyncio


class FaultProxy:
    def __init__(self, target_host, target_port, host="127.0.0.1", port=0):
        self.target_host, self.target_port = target_host, target_port
        self.host, self.port = host, port
        self.pairs = set()  # (downstream writer, upstream writer) of live connections
        self.accepted = 0
        self.cut_count = 0
        self._server = None

    async def start(self):
        self._server = await asyncio.start_server(self._handle, self.host, self.port, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self):
        if self._server is not None:
            self._server.close()
            self._server = None
        for down, up in list(self.pairs):
            _abort(down)
            _abort(up)
        self.pairs.clear()

    async def _handle(self, dr, dw):
        self.accepted += 1
        try:
            ur, uw = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            _abort(dw)
            return
        except asyncio.CancelledError:  # the event loop is shutting down
            _abort(dw)
            return
        pair = (dw, uw)
        self.pairs.add(pair)
        try:
            await asyncio.gather(_pump(dr, uw), _pump(ur, dw))
        except asyncio.CancelledError:
            _abort(dw)
            _abort(uw)
        finally:
            self.pairs.discard(pair)

    def cut(self, pairs):
        """Aborts these connections on both sides."""
        n = 0
        for pair in pairs:
            if pair in self.pairs:
                self.pairs.discard(pair)
                _abort(pair[0])
                _abort(pair[1])
                n += 1
        self.cut_count += n
        return n

    def cut_random(self, fraction, rng):
        live = sorted(self.pairs, key=id)
        k = int(round(len(live) * fraction))
        return self.cut(rng.sample(live, min(k, len(live))))


async def _pump(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError, RuntimeError):
        _abort(writer)
        return
    try:  # the peer closed: pass the close on after what is buffered (a DISCONNECT must arrive)
        writer.close()
    except (OSError, RuntimeError):
        pass


def _abort(writer):
    try:
        writer.transport.abort()
    except (OSError, RuntimeError, AttributeError):
        pass
