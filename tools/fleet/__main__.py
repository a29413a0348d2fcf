# python -m tools.fleet --broker 127.0.0.1:1883 --devices 1000 --duration 60 --cuts 3 --deaths 5 \
#     --manifest out/manifest.jsonl        (see tools/fleet/sim.py for what each option does)
import argparse
import sys

from tools.fleet.sim import FleetConfig, run_fleet, format_summary


def parse(argv=None):
    d = FleetConfig()
    ap = argparse.ArgumentParser(prog="python -m tools.fleet", description="Simulated MQTT 5 device fleet")
    ap.add_argument("--broker", default="%s:%d" % (d.host, d.port), help="host:port")
    ap.add_argument("--devices", type=int, default=d.devices)
    ap.add_argument("--rate", type=float, default=d.rate, help="messages per second per device")
    ap.add_argument("--duration", type=float, default=d.duration, help="seconds of publishing")
    ap.add_argument("--qos-mix", default="0.2,0.4,0.4", help="weights of QoS 0,1,2")
    ap.add_argument("--qos-per", choices=("device", "message"), default=d.qos_per)
    ap.add_argument("--prefix", default=d.prefix)
    ap.add_argument("--cuts", type=int, default=d.cuts, help="connection-cut events")
    ap.add_argument("--cut-fraction", type=float, default=d.cut_fraction)
    ap.add_argument("--cut-via", choices=("proxy", "transport", "mixed"), default=d.cut_via)
    ap.add_argument("--deaths", type=int, default=d.deaths)
    ap.add_argument("--reboot-after", type=float, default=None)
    ap.add_argument("--will-delay", type=int, default=d.will_delay)
    ap.add_argument("--final-status", choices=("online", "offline"), default=d.final_status)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--manifest", default=None)
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    host, _, port = a.broker.rpartition(":")
    return FleetConfig(host=host or "127.0.0.1", port=int(port), devices=a.devices, rate=a.rate, duration=a.duration,
                       qos_mix=tuple(float(x) for x in a.qos_mix.split(",")), qos_per=a.qos_per, prefix=a.prefix,
                       cuts=a.cuts, cut_fraction=a.cut_fraction, cut_via=a.cut_via, deaths=a.deaths,
                       reboot_after=a.reboot_after, will_delay=a.will_delay, final_status=a.final_status,
                       seed=a.seed, manifest=a.manifest, progress=not a.no_progress)


def main(argv=None):
    sm = run_fleet(parse(argv))
    print(format_summary(sm))
    if sm.manifest:
        print("  manifest: %s" % sm.manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
