//! Envoy's RLS v3 gRPC on a [`Endpoints`]: `ShouldRateLimit` decoded within bounds, decided by
//! the engine, and answered as Envoy reads it.

use envoy_types::pb::envoy::config::core::v3::HeaderValue as PbHeader;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as PbCode, DescriptorStatus as PbStatus, RateLimit as PbLimit, rate_limit::Unit as PbUnit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{
    RateLimitRequest as PbRequest, RateLimitResponse as PbResponse,
};
use envoy_types::pb::google::protobuf::Duration as PbDuration;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::Status;
use tonic::codec::{DecodeBuf, EncodeBuf};

use super::Endpoints;
use crate::config::Unit;
use crate::engine::Bounds;
use crate::engine::{
    Code, LimitOverride, RateLimitRequest, RateLimitResponse, RequestDescriptor, RequestError,
};
use crate::serve::GrpcRequest;
use slidewin_store::Backend;

/// Envoy's `RateLimitService` on a [`Endpoints`].
struct Grpc<B: Backend> {
    service: Endpoints<B>,
}

/// The one method's path.
const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// Envoy's RLS as a tower service of HTTP/2 requests: `ShouldRateLimit` through tonic's
/// unary machinery with [`Codec`], any other path `UNIMPLEMENTED`. (The generated
/// `RateLimitServiceServer` does the same with tonic-prost's codec, which answers a
/// message that does not decode with `INTERNAL`.)
pub(crate) struct Rls<B: Backend>(Arc<Grpc<B>>);

impl<B: Backend> Rls<B> {
    pub(crate) fn new(service: Endpoints<B>) -> Rls<B> {
        Rls(Arc::new(Grpc { service }))
    }
}

impl<B: Backend> Clone for Rls<B> {
    fn clone(&self) -> Rls<B> {
        Rls(Arc::clone(&self.0))
    }
}

type Answer = http::Response<tonic::body::Body>;
type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<B: Backend> tower::Service<GrpcRequest> for Rls<B> {
    type Response = Answer;
    type Error = Infallible;
    type Future = Boxed<Result<Answer, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: GrpcRequest) -> Self::Future {
        if request.uri().path() != SHOULD_RATE_LIMIT {
            let status = Status::unimplemented(format!(
                "{}: this service answers only {SHOULD_RATE_LIMIT}",
                request.uri().path()
            ));
            return Box::pin(async move { Ok(status.into_http()) });
        }
        let method = Method(Arc::clone(&self.0));
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(Codec)
                .apply_max_message_size_config(Some(Bounds::MAX_BODY_BYTES), None);
            Ok(grpc.unary(method, request).await)
        })
    }
}

/// `ShouldRateLimit`, as tonic's unary machinery calls it.
struct Method<B: Backend>(Arc<Grpc<B>>);

impl<B: Backend> tonic::server::UnaryService<PbRequest> for Method<B> {
    type Response = PbResponse;
    type Future = Boxed<Result<tonic::Response<PbResponse>, Status>>;

    fn call(&mut self, request: tonic::Request<PbRequest>) -> Self::Future {
        let grpc = Arc::clone(&self.0);
        Box::pin(async move { grpc.should_rate_limit(request).await })
    }
}

/// Protobuf through prost, where a request that does not decode (a string that is not
/// UTF-8, a truncated field) is the client's error, `INVALID_ARGUMENT`, with prost's
/// reason naming the field.
#[derive(Clone, Copy)]
struct Codec;

struct Encoder;

struct Decoder;

impl tonic::codec::Codec for Codec {
    type Encode = PbResponse;
    type Decode = PbRequest;
    type Encoder = Encoder;
    type Decoder = Decoder;

    fn encoder(&mut self) -> Encoder {
        Encoder
    }

    fn decoder(&mut self) -> Decoder {
        Decoder
    }
}

impl tonic::codec::Encoder for Encoder {
    type Item = PbResponse;
    type Error = Status;

    fn encode(&mut self, item: PbResponse, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        // The buffer grows as it is written: prost fails only on a full one.
        prost::Message::encode(&item, dst)
            .map_err(|e| Status::internal(format!("cannot encode the answer: {e}")))
    }
}

impl tonic::codec::Decoder for Decoder {
    type Item = PbRequest;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<PbRequest>, Status> {
        prost::Message::decode(src)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("not a valid RateLimitRequest: {e}")))
    }
}

fn pb_unit(unit: Option<Unit>) -> i32 {
    (match unit {
        None => PbUnit::Unknown,
        Some(Unit::Second) => PbUnit::Second,
        Some(Unit::Minute) => PbUnit::Minute,
        Some(Unit::Hour) => PbUnit::Hour,
        Some(Unit::Day) => PbUnit::Day,
        Some(Unit::Week) => PbUnit::Week,
        Some(Unit::Month) => PbUnit::Month,
        Some(Unit::Year) => PbUnit::Year,
    }) as i32
}

fn unit_of_pb(unit: i32) -> Option<Unit> {
    match PbUnit::try_from(unit).ok()? {
        PbUnit::Second => Some(Unit::Second),
        PbUnit::Minute => Some(Unit::Minute),
        PbUnit::Hour => Some(Unit::Hour),
        PbUnit::Day => Some(Unit::Day),
        PbUnit::Week => Some(Unit::Week),
        PbUnit::Month => Some(Unit::Month),
        PbUnit::Year => Some(Unit::Year),
        PbUnit::Unknown => None,
    }
}

fn pb_code(code: Code) -> i32 {
    (match code {
        Code::Ok => PbCode::Ok,
        Code::OverLimit => PbCode::OverLimit,
    }) as i32
}

#[tonic::async_trait]
impl<B: Backend> RateLimitService for Grpc<B> {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<PbRequest>,
    ) -> Result<tonic::Response<PbResponse>, Status> {
        let traceparent = crate::engine::traceparent(request.metadata().as_ref());
        let ours = request_of_pb(request.into_inner())?;
        let response = self
            .service
            .engine()
            .should_rate_limit_traced(&ours, traceparent.as_deref())
            .await
            .map_err(|e| match e {
                RequestError::Unavailable { .. } => Status::unavailable(e.to_string()),
                _ => Status::invalid_argument(e.to_string()),
            })?;
        Ok(tonic::Response::new(pb_response(response)))
    }
}

/// The engine's request for Envoy's; a descriptor's limit must name a known unit.
fn request_of_pb(request: PbRequest) -> Result<RateLimitRequest, Status> {
    let mut descriptors = Vec::with_capacity(request.descriptors.len());
    for (i, d) in request.descriptors.into_iter().enumerate() {
        let limit = match d.limit {
            None => None,
            Some(limit) => Some(LimitOverride {
                requests_per_unit: limit.requests_per_unit,
                unit: unit_of_pb(limit.unit).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "descriptor {i}'s limit has unit {}: it needs a known unit",
                        limit.unit
                    ))
                })?,
            }),
        };
        descriptors.push(RequestDescriptor {
            entries: d
                .entries
                .into_iter()
                .map(|e| super::json::entry(e.key, e.value))
                .collect(),
            hits_addend: d.hits_addend.map(|h| h.value),
            limit,
            is_negative_hits: d.is_negative_hits,
        });
    }
    Ok(RateLimitRequest {
        domain: request.domain,
        hits_addend: u64::from(request.hits_addend),
        descriptors,
    })
}

/// Envoy's answer for the engine's (the limits' names moved, not copied).
fn pb_response(response: RateLimitResponse) -> PbResponse {
    PbResponse {
        overall_code: pb_code(response.overall_code),
        statuses: response
            .statuses
            .into_iter()
            .map(|s| PbStatus {
                code: pb_code(s.code),
                current_limit: s.current_limit.map(|l| PbLimit {
                    name: l.name,
                    requests_per_unit: l.requests_per_unit,
                    unit: pb_unit(l.unit),
                }),
                limit_remaining: s.limit_remaining,
                duration_until_reset: s.duration_until_reset.map(|d| PbDuration {
                    seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                    nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
                }),
                ..Default::default()
            })
            .collect(),
        response_headers_to_add: response
            .headers
            .iter()
            .map(|(name, value)| PbHeader {
                key: name.as_str().to_owned(),
                value: value.to_str().unwrap_or_default().to_owned(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}
