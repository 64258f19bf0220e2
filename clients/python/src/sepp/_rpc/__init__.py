"""google.rpc.ErrorInfo's wire form as protoc generates it from
``clients/python/proto/sepp/_rpc/error_details.proto`` (internal; that file
says why it is the client's own)."""
