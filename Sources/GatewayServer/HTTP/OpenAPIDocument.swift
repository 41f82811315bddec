/// The HTTP contract, served at `GET /openapi.yaml`. It lives in the executable rather
/// than in a resource bundle so that the binary alone serves it; the contract test
/// (`scripts/contract-test`) checks the running server against it.
enum OpenAPIDocument {
    static let yaml = #"""
openapi: 3.1.0
info:
  title: Attribution Gateway
  version: "1.0.0"
  description: |
    The HTTP contract of Attribution Gateway: what apps, backends, Apple and vendors send,
    and what operators read. Every error is `{"error": {"code", "message", "field"}}`.
    A `2xx` to an ingest route means the payload is on disk.
    A path below asked with a method it does not list is answered `405 method_not_allowed`
    with `Allow`. Apple's two `.well-known` paths are served without their trailing slash
    too. `/v1/noop` and `/v1/noop/iad` (with `server.noop_route`, for the benchmark only)
    are not part of the contract.
servers:
  - url: http://127.0.0.1:8080
security:
  - {}
  - apiKey: []
  - apiKeyHeader: []
paths:
  /v1/iad:
    post:
      summary: A legacy iAd attribution dictionary
      operationId: ingestIAd
      security: [{}, {apiKey: []}, {apiKeyHeader: []}]
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/IAdPayload"}
      responses:
        "202": {$ref: "#/components/responses/Accepted"}
        "200": {$ref: "#/components/responses/Duplicate"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Error"}
        "403": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "408": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
  /v1/adservices:
    post:
      summary: An AdServices token, resolved with Apple
      operationId: ingestAdServices
      security: [{}, {apiKey: []}, {apiKeyHeader: []}]
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/AdServicesRequest"}
      responses:
        "202":
          description: Stored; resolved when Apple answered within answer_wait_ms
          content:
            application/json:
              schema: {$ref: "#/components/schemas/DeferredAnswer"}
        "200":
          description: This token was seen before
          content:
            application/json:
              schema: {$ref: "#/components/schemas/DeferredAnswer"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Error"}
        "403": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "408": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
  /v1/events:
    post:
      summary: Raw sessions, events and purchases, forwarded to the configured vendors
      operationId: ingestEvents
      security: [{}, {apiKey: []}, {apiKeyHeader: []}]
      requestBody:
        required: true
        content:
          application/json:
            schema:
              oneOf:
                - {$ref: "#/components/schemas/RawEvent"}
                - type: array
                  minItems: 1
                  maxItems: 1000
                  items: {$ref: "#/components/schemas/RawEvent"}
      responses:
        "202": {$ref: "#/components/responses/AcceptedOneOrMany"}
        "200": {$ref: "#/components/responses/AcceptedOneOrMany"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Error"}
        "403": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "408": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
  /v1/s2s/{vendor}/callbacks:
    parameters:
      - name: vendor
        in: path
        required: true
        schema: {type: string, enum: [appsflyer, adjust, singular]}
      - name: secret
        in: query
        required: false
        description: The vendor's callback_secret, when the vendor cannot send a header
        schema: {type: string}
    post:
      summary: A vendor's attribution result (served for vendors with a callback_secret)
      operationId: vendorCallback
      security: [{callbackSecret: []}, {callbackBearer: []}]
      requestBody:
        content:
          application/json:
            schema: {$ref: "#/components/schemas/VendorCallback"}
          application/x-www-form-urlencoded:
            schema: {$ref: "#/components/schemas/VendorCallback"}
      responses:
        "200": {$ref: "#/components/responses/Accepted"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Error"}
        "404": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "408": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
    get:
      summary: A vendor's attribution result as query parameters (Adjust's callbacks)
      operationId: vendorCallbackGet
      security: [{callbackSecret: []}, {callbackBearer: []}]
      parameters:
        - {name: idfv, in: query, required: false, schema: {type: string, format: uuid}}
        - {name: idfa, in: query, required: false, description: "kept only when att_status is 3; checked only then", schema: {type: string, format: uuid}}
        - {name: att_status, in: query, required: false, schema: {type: integer, minimum: 0, maximum: 3}}
      responses:
        "200": {$ref: "#/components/responses/Accepted"}
        "401": {$ref: "#/components/responses/Error"}
        "404": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
  /v1/skadnetwork/postbacks:
    post:
      summary: One SKAdNetwork or AdAttributionKit postback, or an array of up to 1,000
      operationId: ingestPostbacks
      security: [{}, {apiKey: []}, {apiKeyHeader: []}]
      requestBody:
        required: true
        content:
          application/json:
            schema:
              oneOf:
                - {$ref: "#/components/schemas/Postback"}
                - type: array
                  minItems: 1
                  maxItems: 1000
                  items: {$ref: "#/components/schemas/Postback"}
      responses:
        "202": {$ref: "#/components/responses/AcceptedOneOrMany"}
        "200": {$ref: "#/components/responses/AcceptedOneOrMany"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Error"}
        "403": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "408": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
  /.well-known/skadnetwork/report-attribution/:
    post:
      summary: Apple's developer copy of a SKAdNetwork postback (answered 200, new or not)
      operationId: appleSKANCopy
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Postback"}
      responses:
        "200": {$ref: "#/components/responses/Accepted"}
        "400": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "408": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
  /.well-known/appattribution/report-attribution/:
    post:
      summary: Apple's copy of an AdAttributionKit postback (answered 200, new or not)
      operationId: appleAAKCopy
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Postback"}
      responses:
        "200": {$ref: "#/components/responses/Accepted"}
        "400": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "408": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
  /v1/skadnetwork/conversion-value:
    get:
      summary: The next SKAN conversion value from the conversion model
      operationId: conversionValue
      security: [{}, {apiKey: []}, {apiKeyHeader: []}, {apiKeyQuery: []}]
      parameters:
        - {name: n, in: query, required: true, description: "event name, __SESSION__ for sessions", schema: {type: string}}
        - {name: conversion_value, in: query, schema: {type: string}}
        - {name: total_revenue_by_currency, in: query, description: "a JSON object such as {\"USD\": 4.99}", schema: {type: string}}
        - {name: first_call_to_skadnetwork_timestamp, in: query, schema: {type: string}}
        - {name: last_call_to_skadnetwork_timestamp, in: query, schema: {type: string}}
        - {name: skan_version, in: query, description: "4.0 or later, or aak: answered for the postback window the first call places the device in", schema: {type: string}}
        - {name: coarse_value, in: query, description: "the current window's coarse value (SKAN 4 and AdAttributionKit)", schema: {enum: [low, medium, high]}}
      responses:
        "200":
          description: The value to set, or none when nothing changes
          content:
            application/json:
              schema: {$ref: "#/components/schemas/ConversionValueAnswer"}
        "400":
          description: Bad input (the client snippet's status and reason, and the gateway's error object)
          content:
            application/json:
              schema: {$ref: "#/components/schemas/ConversionValueAnswer"}
        "401": {$ref: "#/components/responses/ConversionValueError"}
        "404": {$ref: "#/components/responses/ConversionValueError"}
        "405": {$ref: "#/components/responses/ConversionValueError"}
        "429":
          description: Over a per-key or per-IP limit, in the snippet's shape
          headers:
            Retry-After: {$ref: "#/components/headers/RetryAfter"}
          content:
            application/json:
              schema: {$ref: "#/components/schemas/ConversionValueAnswer"}
  /functions/v1/create-user:
    post:
      summary: ASA Attribution SDK backend — create a user, optionally with a token
      operationId: sdkCreateUser
      security: [{}, {apiKey: []}, {apiKeyHeader: []}]
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                asa_attribution_token: {type: string}
      responses:
        "200":
          description: The new user
          content:
            application/json:
              schema:
                type: object
                required: [userId, didUserComeFromAsa, asaAttributionResolved]
                properties:
                  userId: {type: integer}
                  didUserComeFromAsa: {type: boolean}
                  asaAttributionResolved: {type: boolean}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Error"}
        "403": {$ref: "#/components/responses/Error"}
        "404": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "408": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
  /functions/v1/resolve-asa-attribution:
    post:
      summary: ASA Attribution SDK backend — resolve a user's token
      operationId: sdkResolve
      security: [{}, {apiKey: []}, {apiKeyHeader: []}]
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [user_id, asa_attribution_token]
              properties:
                user_id: {type: integer}
                asa_attribution_token: {type: string}
      responses:
        "200":
          description: The user's attribution so far
          content:
            application/json:
              schema:
                type: object
                required: [didUserComeFromAsa, asaAttributionResolved]
                properties:
                  didUserComeFromAsa: {type: boolean}
                  asaAttributionResolved: {type: boolean}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Error"}
        "403": {$ref: "#/components/responses/Error"}
        "404": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "408": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
  /functions/v1/associate-user:
    post:
      summary: ASA Attribution SDK backend — tie a StoreKit transaction to a user
      operationId: sdkAssociate
      security: [{}, {apiKey: []}, {apiKeyHeader: []}]
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [user_id, transaction_id]
              properties:
                user_id: {type: integer}
                transaction_id: {type: string}
      responses:
        "200":
          description: Associated (idempotent)
          content:
            application/json:
              schema:
                type: object
                required: [success, user]
                properties:
                  success: {type: boolean}
                  user:
                    type: object
                    required: [id, transaction_id]
                    properties:
                      id: {type: integer}
                      transaction_id: {type: string}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Error"}
        "403": {$ref: "#/components/responses/Error"}
        "404": {$ref: "#/components/responses/Error"}
        "409": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "408": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/RateLimited"}
        "503": {$ref: "#/components/responses/Unavailable"}
  /healthz:
    get:
      summary: Liveness
      operationId: healthz
      responses:
        "200":
          description: The process answers
          content:
            application/json:
              schema:
                type: object
                required: [status]
                properties:
                  status: {const: ok}
  /readyz:
    get:
      summary: Readiness
      operationId: readyz
      responses:
        "200":
          description: Not shutting down, store reachable and committing, every sink worker running, no outbox older than the bound
          content:
            application/json:
              schema:
                type: object
                required: [status]
                properties:
                  status: {const: ready}
        "503":
          description: Not ready, with the reasons
          content:
            application/json:
              schema:
                type: object
                required: [status, problems]
                properties:
                  status: {const: not_ready}
                  problems: {type: array, items: {type: string}}
  /metrics:
    get:
      summary: Prometheus metrics
      operationId: metrics
      responses:
        "200":
          description: Prometheus text exposition
          content:
            text/plain:
              schema: {type: string}
  /openapi.yaml:
    get:
      summary: This document
      operationId: openapi
      responses:
        "200":
          description: The OpenAPI document
          content:
            application/yaml:
              schema: {type: string}
components:
  headers:
    RetryAfter:
      description: Seconds until the caller may send again
      required: true
      schema: {type: string, pattern: "^[0-9]+$"}
  securitySchemes:
    apiKey:
      type: http
      scheme: bearer
      description: A key of auth.api_keys; needed only when keys are configured
    apiKeyHeader:
      type: apiKey
      in: header
      name: apikey
      description: The same key in Supabase's header, as the ASA Attribution SDK sends it
    apiKeyQuery:
      type: apiKey
      in: query
      name: a
      description: The same key as the query's a, as the client snippet of Singular's SKAN S2S guide sends it
    callbackSecret:
      type: apiKey
      in: header
      name: X-Gateway-Secret
    callbackBearer:
      type: http
      scheme: bearer
  responses:
    Error:
      description: A JSON error naming the field when one is at fault
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    ConversionValueError:
      description: Any error of the conversion-value route, in the client snippet's shape (status and reason)
      content:
        application/json:
          schema: {$ref: "#/components/schemas/ConversionValueAnswer"}
    RateLimited:
      description: Over a per-key or per-IP limit (`rate_limited`); nothing was read or stored
      headers:
        Retry-After: {$ref: "#/components/headers/RetryAfter"}
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    Unavailable:
      description: The store could not take the record (`storage_unavailable`); nothing was recorded, send it again
      headers:
        Retry-After:
          description: Seconds to wait before sending again
          required: true
          schema: {type: string, pattern: "^[0-9]+$"}
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    Accepted:
      description: Stored (or a duplicate of a stored record)
      content:
        application/json:
          schema: {$ref: "#/components/schemas/IngestAnswer"}
    Duplicate:
      description: Already stored under the same dedupe key
      content:
        application/json:
          schema: {$ref: "#/components/schemas/IngestAnswer"}
    AcceptedOneOrMany:
      description: One answer for an object, `results` for an array
      content:
        application/json:
          schema:
            oneOf:
              - {$ref: "#/components/schemas/IngestAnswer"}
              - {$ref: "#/components/schemas/BatchAnswer"}
  schemas:
    Error:
      type: object
      required: [error]
      properties:
        error:
          type: object
          required: [code, message]
          properties:
            code:
              type: string
              examples: [malformed_json, missing_field, invalid_field, payload_too_large, request_timeout, incomplete_body, unauthorized, forbidden, rate_limited, conflict, invalid_signature, not_found, method_not_allowed, malformed_http, storage_unavailable, internal_error]
            message: {type: string}
            field: {type: string, description: "the dotted path of the faulty field, e.g. [1].att_status"}
    IngestAnswer:
      type: object
      required: [record_id, status, provider, resolution, attributed]
      properties:
        record_id: {type: string}
        status: {enum: [accepted, duplicate]}
        duplicate_of: {type: string}
        provider: {type: string, description: "For a duplicate, the stored original's, as are resolution and attributed."}
        resolution: {enum: [resolved, pending, not_found, invalid]}
        attributed: {type: boolean}
    BatchAnswer:
      type: object
      required: [results]
      properties:
        results:
          type: array
          items: {$ref: "#/components/schemas/IngestAnswer"}
    DeferredAnswer:
      type: object
      required: [record_id, status, provider, resolution, resolved]
      properties:
        record_id: {type: string}
        status: {enum: [accepted, duplicate]}
        duplicate_of: {type: string}
        provider: {type: string}
        resolution: {enum: [resolved, pending, not_found, invalid]}
        resolved: {type: boolean}
        attributed: {type: boolean}
    DeviceFields:
      type: object
      properties:
        idfv: {type: string, format: uuid}
        idfa: {type: string, format: uuid, description: "kept only when att_status is 3 and it is not all zeros; checked only then"}
        att_status: {type: integer, minimum: 0, maximum: 3}
    VendorCallback:
      description: The vendor's own fields, read as the README's callback map for that vendor says; the device ids are checked as on every route
      allOf:
        - {$ref: "#/components/schemas/DeviceFields"}
        - {type: object, additionalProperties: true}
    IAdPayload:
      allOf:
        - {$ref: "#/components/schemas/DeviceFields"}
        - type: object
          required: [app_id, app_user_id, Version3.1]
          properties:
            app_id: {type: [string, integer]}
            app_user_id: {type: string}
            Version3.1:
              type: object
              required: [iad-attribution]
              properties:
                iad-attribution: {type: [string, boolean]}
              additionalProperties: true
    AdServicesRequest:
      allOf:
        - {$ref: "#/components/schemas/DeviceFields"}
        - type: object
          required: [token, app_id, app_user_id]
          properties:
            token: {type: string, description: "AAAttribution.attributionToken(), Base64, at most 16 KiB"}
            app_id: {type: [string, integer]}
            app_user_id: {type: string}
    RawEvent:
      type: object
      required: [type, app_id]
      additionalProperties: false
      properties:
        type: {enum: [session, event, purchase, refund]}
        name: {type: string, description: "required for type event"}
        app_id: {type: [string, integer]}
        bundle_id: {type: string}
        app_user_id: {type: string}
        event_id: {type: string, description: "dedupes resent events"}
        idfv: {type: string, format: uuid}
        idfa: {type: string, format: uuid}
        att_status: {type: integer, minimum: 0, maximum: 3}
        ip: {type: string}
        user_agent: {type: string}
        os_version: {type: string}
        device_model: {type: string}
        locale: {type: string}
        app_version: {type: string}
        timestamp: {type: [string, number], description: "ISO-8601 or Unix seconds"}
        revenue: {type: [number, string], description: "required for type purchase; for a refund, the amount given back (positive)"}
        currency: {type: string, pattern: "^[A-Z]{3}$"}
        transaction_id: {type: string, description: "required for type refund: the refunded purchase's"}
        product_id: {type: string}
        adservices_token: {type: string}
        skan_conversion_value: {type: integer, minimum: 0, maximum: 63}
        skan_first_call_timestamp: {type: integer}
        skan_last_call_timestamp: {type: integer}
        vendor_ids:
          type: object
          properties:
            appsflyer_id: {type: string, pattern: "^[0-9]{13}-[0-9]{7}$"}
            adid: {type: string, pattern: "^[0-9a-fA-F]{32}$"}
          additionalProperties: {type: string}
        properties:
          type: object
          maxProperties: 50
          additionalProperties: {type: [string, number, boolean]}
    Postback:
      type: object
      description: A SKAdNetwork postback (version, ad-network-id, attribution-signature, …) or an AdAttributionKit one (jws-string, …)
      additionalProperties: true
    ConversionValueAnswer:
      type: object
      required: [status]
      properties:
        conversion_value: {type: integer, minimum: 0, maximum: 63}
        coarse_value: {enum: [low, medium, high]}
        postback_sequence_index: {type: integer, minimum: 0, maximum: 2, description: "the SKAN 4 window answered for"}
        status: {enum: [ok, error]}
        reason: {type: string}
        error:
          type: object
          description: on an error, the same error object every other route answers with
          required: [code, message]
          properties:
            code: {type: string}
            message: {type: string}
            field: {type: string}
"""#
}
