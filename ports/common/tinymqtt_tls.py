# TLS for the board ports (ports/common): the SSLContext a connection verifies the server with, from the CA
# the caller names. Loaded by tinymqtt_board.open() and tinymqtt_stream.open_stream() only when TLS is asked
# for, so a board on plain MQTT never holds it in RAM.


def _pem_to_der(data):
    """The DER certificates of a PEM text, or None when data is not PEM. MicroPython's mbedTLS may be built
    without PEM parsing (the unix port here says "invalid cert"); DER always loads, each call adding one CA."""
    if not data.lstrip().startswith(b"-----BEGIN"):
        return None
    from binascii import a2b_base64
    out, b64 = [], None
    for line in data.split(b"\n"):
        line = line.strip()
        if line.startswith(b"-----BEGIN"):
            b64 = []
        elif line.startswith(b"-----END"):
            out.append(a2b_base64(b"".join(b64)))
            b64 = None
        elif b64 is not None:
            b64.append(line)
    return out


def _load_cas(ctx, data):
    for der in _pem_to_der(data) or (data,):
        ctx.load_verify_locations(cadata=der)


def tls_context(tls):
    """An SSLContext that verifies the server against the CA the caller names. tls: an SSLContext, or a dict
    with cafile/cadata (PEM or DER), certfile/keyfile (client certificate), server_hostname, or
    insecure=True to skip verification explicitly. A board has no CA store, so plain True is refused."""
    if hasattr(tls, "wrap_socket"):
        return tls
    import ssl
    opts = tls if isinstance(tls, dict) else {}
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if opts.get("insecure"):
        ctx.verify_mode = ssl.CERT_NONE
    else:
        cadata = opts.get("cadata")
        if cadata is None:
            if not opts.get("cafile"):
                raise ValueError("TLS on a board needs the broker's CA: tls={'cafile': 'ca.pem'} (no CA store)")
            with open(opts["cafile"], "rb") as f:
                cadata = f.read()
        ctx.verify_mode = ssl.CERT_REQUIRED
        _load_cas(ctx, cadata)
    if opts.get("certfile"):
        ctx.load_cert_chain(opts["certfile"], opts.get("keyfile"))
    return ctx
