# MQTT 5 on top of the MQTT 3.1/3.1.1 session: properties, topic aliases, reason codes, AUTH and the server's
# limits. A 3.1.1 board never imports it; the drivers choose Session5 for version=5 (tinymqtt.driver).
from tinymqtt.session import Session as Session5  # noqa: F401 (for now the one session class; being split)
