"""The invoice source: read-only, so it needs no table.

Each invoice is derived from its number by a hash, so that the same number always reads the
same (a read step may be retried any number of times) and different numbers spread over the
vendors, and so over the categories the model endpoint will propose.
"""

import hashlib
from datetime import date, timedelta
from decimal import Decimal

# vendor, and the descriptions of its invoice lines (their words drive the classifier).
VENDORS = [
    ("Papeterie Lumière SARL", ["Printer paper, 20 boxes", "Toner cartridges"]),
    ("CloudForge Software GmbH", ["Software license, annual subscription",
                                  "Cloud hosting, 12 months"]),
    ("Nordic Rail & Air Travel", ["Flight Berlin-Lisbon, 2 travellers", "Hotel, 3 nights"]),
    ("Brightline Facility Services", ["Office cleaning services, monthly",
                                      "Maintenance call-out"]),
    ("Bureau Supplies Direct", ["Office chairs, 4 units", "Stationery and pens"]),
    ("Meridian Consulting Partners", ["Consulting services, 6 days", "Workshop facilitation"]),
]
FIRST_ISSUE_DATE = date(2025, 1, 1)


def invoice_for(number: str) -> dict:
    digest = int.from_bytes(hashlib.sha256(number.encode()).digest()[:8], "big")
    vendor, descriptions = VENDORS[digest % len(VENDORS)]
    total_cents = 5_000 + (digest >> 8) % 495_000          # 50.00 .. 4999.99
    first_cents = total_cents * (55 + (digest >> 32) % 30) // 100
    line_cents = [first_cents, total_cents - first_cents]
    return {
        "number": number,
        "vendor": vendor,
        "amount": _money(total_cents),
        "currency": "EUR",
        "issued_on": (FIRST_ISSUE_DATE + timedelta(days=(digest >> 16) % 365)).isoformat(),
        "lines": [{"description": d, "amount": _money(c)}
                  for d, c in zip(descriptions, line_cents, strict=True)],
    }


def _money(cents: int) -> str:
    return f"{Decimal(cents) / 100:.2f}"


def vendor_named(name: str) -> dict | None:
    """The vendor record the vendor registry holds for `name` (its bank account is derived
    from the name, so it reads the same every time), or None."""
    for vendor, _ in VENDORS:
        if vendor.lower() == name.strip().lower():
            digits = int.from_bytes(hashlib.sha256(vendor.encode()).digest()[:8], "big")
            return {"name": vendor, "status": "approved",
                    "iban": f"DE{digits % 100:02d}{digits % 10**18:018d}"}
    return None
