"""Shared code of the contact-center functions, shipped as the SharedLayer.

Pure modules (no AWS I/O): model, keys, rules, files, s3_events, gift_cards, notifications.
Stream records of CONTACT items as plain values: contacts.
AWS adapters (clients passed in, built once by each handler): store, objects, notify.
The ingest of one file, over those adapters: ingest.
One Powertools idempotency configuration: idempotency.
"""
