//! Stream state: open streams, and the memory of recently closed ones that
//! lets late frames be told apart from frames on streams the client itself
//! ended (RFC 9113 §5.1).

use crate::budget::Body;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A request whose message is arriving.
pub(super) struct Receiving {
    pub path: String,
    pub timeout: Option<Duration>,
    pub body: Body,
    /// The `content-length` the client announced, checked at the end.
    pub content_length: Option<u64>,
    /// The whole message must be here by then.
    pub deadline: Instant,
}

pub(super) enum StreamState {
    /// Request headers seen, collecting the message.
    Receiving(Box<Receiving>),
    /// The request is complete and with its handler (or queued for it).
    Running,
    /// The client reset the stream, or we did, while its handler runs:
    /// nothing will be sent, but the stream keeps its place under the
    /// concurrency limit until the handler is done (so resets cannot pile up
    /// work).
    Cancelled,
    /// The reply waits for flow-control window: DATA from `pos`, then the
    /// trailers.
    Sending {
        data: Vec<u8>,
        pos: usize,
        trailers: Vec<u8>,
    },
}

pub(super) struct Stream {
    pub state: StreamState,
    /// What we may still send on this stream.
    pub send_window: i64,
    /// What the client may still send on this stream.
    pub recv_window: i64,
    /// Connection-window bytes of this stream's DATA not yet given back.
    pub held_window: usize,
}

/// How a stream closed, for the frames that arrive after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Closure {
    /// The client had ended its side (END_STREAM or RST_STREAM): any frame
    /// but PRIORITY and WINDOW_UPDATE is an error of type STREAM_CLOSED.
    Finished,
    /// We cut the client off (RST_STREAM, refusal, an early reply) while it
    /// may still have been sending: frames already in flight are ignored.
    Reset,
}

/// The last `capacity` closed streams. Older ones are forgotten: a HEADERS
/// frame for one of them is then a PROTOCOL_ERROR, as for an id that was
/// never opened.
pub(super) struct ClosedStreams {
    ids: VecDeque<(u32, Closure)>,
    capacity: usize,
}

impl ClosedStreams {
    pub fn new(capacity: usize) -> Self {
        ClosedStreams {
            ids: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    pub fn record(&mut self, id: u32, how: Closure) {
        if self.ids.len() == self.capacity {
            self.ids.pop_front();
        }
        self.ids.push_back((id, how));
    }

    pub fn find(&self, id: u32) -> Option<Closure> {
        self.ids
            .iter()
            .rev()
            .find(|(i, _)| *i == id)
            .map(|&(_, how)| how)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_closure_wins_and_old_ones_are_forgotten() {
        let mut c = ClosedStreams::new(3);
        c.record(1, Closure::Reset);
        c.record(3, Closure::Finished);
        c.record(1, Closure::Finished);
        assert_eq!(c.find(1), Some(Closure::Finished));
        assert_eq!(c.find(3), Some(Closure::Finished));
        c.record(5, Closure::Reset);
        c.record(7, Closure::Reset);
        assert_eq!(c.find(3), None);
        assert_eq!(c.find(5), Some(Closure::Reset));
        assert_eq!(c.find(9), None);
    }
}
