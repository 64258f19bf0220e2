"""The messages and enums of Sepp's API, ``proto/sepp/v1``, as protoc
generates them (``clients/python/generate.sh``; never edited by hand).

The package has the proto package's name, ``sepp.v1``, so that the generated
modules' imports of each other resolve. Programs use the client's
dataclasses (:mod:`sepp.types`); these are for the wire, and for code that
wants a message itself, such as the reasons of :mod:`sepp.v1.reason_pb2`.
"""
