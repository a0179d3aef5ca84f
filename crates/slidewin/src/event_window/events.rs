//! [`Events`], an iterator over an [`EventWindow`]'s events, oldest first.

use std::iter::FusedIterator;
use std::slice;

use super::EventWindow;
use crate::time::Moment;

impl<'a, T> IntoIterator for &'a EventWindow<T> {
    type Item = (Moment, &'a T);
    type IntoIter = Events<'a, T>;

    fn into_iter(self) -> Events<'a, T> {
        self.iter()
    }
}

/// The events of an [`EventWindow`], oldest first; from [`EventWindow::iter`].
///
/// ```
/// use std::time::Duration;
/// use slidewin::{EventWindow, Moment};
/// let mut w = EventWindow::new(Duration::from_secs(10))?;
/// w.record(Moment::from_secs(1), 'a');
/// w.record(Moment::from_secs(2), 'b');
/// let mut it = w.iter();
/// assert_eq!(it.len(), 2);
/// assert_eq!(it.next_back(), Some((Moment::from_secs(2), &'b')));
/// # Ok::<(), slidewin::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Events<'a, T> {
    pub(super) inner: slice::Iter<'a, (Moment, T)>,
}

impl<'a, T> Iterator for Events<'a, T> {
    type Item = (Moment, &'a T);

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(t, p)| (*t, p))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<T> DoubleEndedIterator for Events<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(t, p)| (*t, p))
    }
}

impl<T> ExactSizeIterator for Events<'_, T> {}

impl<T> FusedIterator for Events<'_, T> {}
