"""Parses a Prometheus text exposition (stdin) with Prometheus's own Python parser and prints
one line per sample: `name{label=value,...} value`, labels sorted. Exits non-zero (with the
parser's error) when the text is not valid exposition format."""
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = sys.stdin.read()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            print(f"{family.type} {s.name}{{{labels}}} {s.value}")


if __name__ == "__main__":
    main()
