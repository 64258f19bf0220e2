/**
 * The standard gRPC health service (grpc.health.v1.Health/Check), which Sepp
 * serves on its API port for gRPC and Connect alike. `SeppClient.connect`
 * calls it once to make sure the server answers. The descriptor is built here
 * from the two messages of the upstream health.proto it needs, so that no
 * proto outside `proto/` is vendored.
 *
 * @module
 */
import { create, createFileRegistry, type DescMessage, type DescService } from "@bufbuild/protobuf";
import {
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";

const file = create(FileDescriptorProtoSchema, {
  name: "grpc/health/v1/health.proto",
  package: "grpc.health.v1",
  syntax: "proto3",
  messageType: [
    {
      name: "HealthCheckRequest",
      field: [{ name: "service", number: 1, type: FieldDescriptorProto_Type.STRING, label: FieldDescriptorProto_Label.OPTIONAL, jsonName: "service" }],
    },
    {
      name: "HealthCheckResponse",
      field: [
        {
          name: "status",
          number: 1,
          type: FieldDescriptorProto_Type.ENUM,
          typeName: ".grpc.health.v1.HealthCheckResponse.ServingStatus",
          label: FieldDescriptorProto_Label.OPTIONAL,
          jsonName: "status",
        },
      ],
      enumType: [
        {
          name: "ServingStatus",
          value: [
            // connect-go's grpchealth writes these names in JSON; binary
            // (gRPC) carries only the numbers, as in the upstream proto.
            { name: "SERVING_STATUS_UNKNOWN", number: 0 },
            { name: "SERVING_STATUS_SERVING", number: 1 },
            { name: "SERVING_STATUS_NOT_SERVING", number: 2 },
            { name: "SERVING_STATUS_SERVICE_UNKNOWN", number: 3 },
          ],
        },
      ],
    },
  ],
  service: [
    {
      name: "Health",
      method: [{ name: "Check", inputType: ".grpc.health.v1.HealthCheckRequest", outputType: ".grpc.health.v1.HealthCheckResponse" }],
    },
  ],
});

const registry = createFileRegistry(file, () => undefined);

/** The grpc.health.v1.Health service descriptor. */
export const HealthService = registry.getService("grpc.health.v1.Health") as DescService;

/** The HealthCheckResponse message descriptor. */
export const HealthCheckResponseSchema = registry.getMessage("grpc.health.v1.HealthCheckResponse") as DescMessage;

/** The numeric SERVING status of HealthCheckResponse. */
export const SERVING = 1;
