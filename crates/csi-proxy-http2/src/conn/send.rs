//! The reply side: response headers, the message as DATA within the
//! client's windows, trailers, early answers and resets.

use super::streams::{Closure, StreamState};
use super::Connection;
use crate::frame::{self, ErrorCode};
use crate::hpack;
use crate::service::{Code, Reply};

impl Connection {
    /// Send the reply of stream `id`. A stream the client has reset (or one
    /// already answered, e.g. after its deadline) is ignored.
    pub fn respond(&mut self, id: u32, reply: &Reply) {
        self.answer(id, reply, false);
    }

    /// Answer a stream at once with an error; if the client has not
    /// finished sending, ask it to stop (RST_STREAM NO_ERROR, RFC 9113
    /// §8.1).
    pub(super) fn reply_now(&mut self, id: u32, reply: &Reply, client_still_sending: bool) {
        debug_assert!(reply.code != Code::Ok);
        self.answer(id, reply, client_still_sending);
    }

    fn answer(&mut self, id: u32, reply: &Reply, client_still_sending: bool) {
        if self.failed {
            return;
        }
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let cut_off = match s.state {
            StreamState::Sending { .. } => return,
            StreamState::Cancelled => {
                self.close_stream(id, Closure::Finished);
                return;
            }
            StreamState::Receiving(_) => true,
            StreamState::Running => client_still_sending,
        };
        let mut block = Vec::with_capacity(64);
        hpack::put_response_head(&mut block);
        if reply.code != Code::Ok {
            // Trailers-only response.
            hpack::put_grpc_status(&mut block, reply.code as i32, &reply.message);
            frame::put_header_block(self.out.back(), id, &block, true, self.peer_max_frame);
            if cut_off {
                frame::put_rst(self.out.back(), id, ErrorCode::NoError);
                self.close_stream(id, Closure::Reset);
            } else {
                self.close_stream(id, Closure::Finished);
            }
            return;
        }
        frame::put_header_block(self.out.back(), id, &block, false, self.peer_max_frame);
        let mut data = Vec::with_capacity(5 + reply.body.len());
        data.push(0);
        data.extend_from_slice(&(reply.body.len() as u32).to_be_bytes());
        data.extend_from_slice(&reply.body);
        let mut trailers = Vec::with_capacity(16);
        hpack::put_grpc_status(&mut trailers, 0, "");
        s.state = StreamState::Sending {
            data,
            pos: 0,
            trailers,
        };
        self.sending += 1;
        self.send(id);
    }

    /// A plain HTTP error for a request that is not gRPC at all.
    pub(super) fn http_error(&mut self, id: u32, status: u16, client_still_sending: bool) {
        let mut block = Vec::new();
        hpack::put_http_status(&mut block, status);
        frame::put_header_block(self.out.back(), id, &block, true, self.peer_max_frame);
        if client_still_sending {
            frame::put_rst(self.out.back(), id, ErrorCode::NoError);
            self.close_stream(id, Closure::Reset);
        } else {
            self.close_stream(id, Closure::Finished);
        }
    }

    /// Send what the windows allow of every reply that is waiting.
    pub(super) fn pump(&mut self) {
        if self.sending == 0 || self.send_window <= 0 {
            return;
        }
        let waiting: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| matches!(s.state, StreamState::Sending { .. }))
            .map(|(&id, _)| id)
            .collect();
        for id in waiting {
            if self.send_window <= 0 {
                break;
            }
            self.send(id);
        }
    }

    fn send(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let StreamState::Sending {
            data,
            pos,
            trailers,
        } = &mut s.state
        else {
            return;
        };
        let out = self.out.back();
        while *pos < data.len() {
            let window = self.send_window.min(s.send_window);
            if window <= 0 {
                return;
            }
            let n = (data.len() - *pos)
                .min(self.peer_max_frame)
                .min(window as usize);
            frame::put_frame(out, frame::DATA, 0, id, &data[*pos..*pos + n]);
            *pos += n;
            self.send_window -= n as i64;
            s.send_window -= n as i64;
        }
        frame::put_header_block(out, id, trailers, true, self.peer_max_frame);
        self.close_stream(id, Closure::Finished);
    }
}
